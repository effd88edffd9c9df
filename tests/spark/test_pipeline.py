"""Declaring and loading pipelines: what a pipeline module may say, and the one line it gets when broken.

No Spark here: a pipeline is loaded and checked without a JVM.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lotline.domain.errors import InvalidInput
from lotline.services.config import load_settings, parse_spark_conf
from lotline.spark.connect import check_version, parse_url
from lotline.spark.pipeline import Pipeline, PipelineError, load_pipeline
from lotline.spark.session import check_master

HEADER = """
from lotline.spark.pipeline import Pipeline
p = Pipeline("weblogs")
raw = p.dataset("raw_logs", format="text", interval="PT5M")
hits = p.dataset("hits", format="parquet", interval="PT5M")
hourly = p.dataset("hourly_hits", format="parquet", interval="PT1H")
"""


def write_pipeline(directory: Path, body: str, name: str = "weblogs.py") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(HEADER) + textwrap.dedent(body))
    return path


def test_a_pipeline_derives_order_mappings_and_parameters(tmp_path: Path) -> None:
    path = write_pipeline(
        tmp_path,
        """
        @p.job(inputs=[hits], output=hourly)
        def hourly_counts(hits, lot):
            return hits

        @p.job(inputs=[raw], output=hits)
        def parse(raw_logs):
            return raw_logs
        """,
    )
    pipeline = load_pipeline(str(path))
    assert (pipeline.name, pipeline.namespace) == ("weblogs", "weblogs")
    parse, hourly = pipeline.ordered_jobs()
    assert (parse.name, hourly.name) == ("parse", "hourly_counts")
    assert (parse.lot_mapping, hourly.lot_mapping) == (None, "PT5M->PT1H")
    assert (dict(parse.parameters), parse.takes_lot) == ({"raw_logs": "raw_logs"}, False)
    assert (dict(hourly.parameters), hourly.takes_lot) == ({"hits": "hits"}, True)
    assert parse.location.endswith(":parse")


def test_the_job_version_digest_follows_code_and_declarations(tmp_path: Path) -> None:
    body = """
    @p.job(inputs=[raw], output=hits)
    def parse(raw_logs):
        return raw_logs{suffix}
    """
    first = load_pipeline(str(write_pipeline(tmp_path, body.format(suffix=""), "a.py"))).jobs["parse"]
    same = load_pipeline(str(write_pipeline(tmp_path, body.format(suffix=""), "b.py"))).jobs["parse"]
    changed = load_pipeline(str(write_pipeline(tmp_path, body.format(suffix=".limit(1)"), "c.py")))
    # A docstring, a comment and blank lines cannot change the data: the same version.
    noted = 'def parse(raw_logs):\n        """Keeps every row."""\n\n        # as it came\n'
    explained = body.replace("def parse(raw_logs):\n", noted)
    commented = load_pipeline(str(write_pipeline(tmp_path, explained.format(suffix=""), "d.py")))
    assert first.code_digest == same.code_digest == commented.jobs["parse"].code_digest
    assert changed.jobs["parse"].code_digest != first.code_digest
    pipeline = Pipeline("p")
    source = pipeline.dataset("raw_logs", format="csv", interval="PT5M", options={"header": "true"})
    out = pipeline.dataset("out", format="parquet", interval="PT5M")
    pipeline.job(inputs=[source], output=out, name="parse")(first.transform)
    assert pipeline.jobs["parse"].code_digest != first.code_digest  # other reader options


def test_the_job_version_follows_the_helpers_and_constants_of_its_file_it_uses(tmp_path: Path) -> None:
    """A helper function of the pipeline file the transform calls (and what that calls), a class
    it uses and a constant it names enter the version; a function it does not use, a comment in a
    helper, and anything imported do not."""
    body = """
    import textwrap

    LIMIT = {limit}

    class Shape:
        def size(self, frame):
            return frame.limit({size})

    def keep(frame):
        # {comment}
        return Shape().size(frame).limit(LIMIT)

    def unused():
        return {unused}

    def total(frame):
        return keep(frame)

    @p.job(inputs=[raw], output=hits)
    def parse(raw_logs):
        return total(raw_logs)
    """
    base = {"limit": 5, "size": 9, "comment": "as it came", "unused": 1}
    digests = {}
    for n, (key, value) in enumerate(
        [("", None), ("limit", 6), ("size", 8), ("comment", "x"), ("unused", 2)]
    ):
        values = base | ({key: value} if key else {})
        path = write_pipeline(tmp_path, body.format(**values), f"v{n}.py")
        digests[key] = load_pipeline(str(path)).jobs["parse"].code_digest
    assert digests["limit"] != digests[""]  # a constant the helper names
    assert digests["size"] != digests[""]  # a method of a class the helper uses
    assert digests["comment"] == digests[""] == digests["unused"]  # no change to what runs


def test_a_pipeline_loads_from_a_module_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_pipeline(
        tmp_path,
        """
        @p.job(inputs=[raw], output=hits)
        def parse(raw_logs):
            return raw_logs
        """,
        "my_weblogs.py",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert list(load_pipeline("my_weblogs").jobs) == ["parse"]


BROKEN = [
    ("import nothing_such_module\n", "cannot load pipeline .*: ModuleNotFoundError: No module named"),
    ("def broken(:\n", "cannot load pipeline .*: SyntaxError"),
    (
        """
        @p.job(inputs=["clicks"], output=hits)
        def parse(clicks):
            return clicks
        """,
        "job parse: dataset 'clicks' is not declared in pipeline weblogs",
    ),
    (
        """
        @p.job(inputs=[raw], output=hits)
        def parse(raw_logs):
            return raw_logs

        @p.job(inputs=[raw], output=hits)
        def parse_again(raw_logs):
            return raw_logs
        """,
        "job parse_again: dataset hits is already produced by job parse",
    ),
    (
        """
        a = p.dataset("a", format="parquet", interval="PT5M")
        b = p.dataset("b", format="parquet", interval="PT5M")

        @p.job(inputs=[a], output=b)
        def one(a):
            return a

        @p.job(inputs=[b], output=a)
        def two(b):
            return b
        """,
        "jobs form a cycle: one -> two -> one",
    ),
    (
        """
        odd = p.dataset("odd", format="parquet", interval="PT7M")
        """,
        "does not divide a day",
    ),
    (
        """
        ten = p.dataset("ten", format="parquet", interval="PT10M")
        quarter = p.dataset("quarter", format="parquet", interval="PT15M")

        @p.job(inputs=[ten], output=quarter)
        def roll(ten):
            return ten
        """,
        "job roll: lot mapping 'PT10M->PT15M': input interval PT10M does not divide output interval PT15M "
        "evenly.",
    ),
    (
        """
        @p.job(inputs=[raw], output=hits)
        def parse(raw_log):
            return raw_log
        """,
        "job parse: transform parameter raw_log matches no input",
    ),
    (
        """
        @p.job(inputs=[raw], output=hits)
        def parse(lot):
            return None
        """,
        "job parse: input raw_logs is not a parameter of the transform",
    ),
    ('p.dataset("x", format="avro")\n', "dataset x: format 'avro' is not one of"),
    ("q = Pipeline('other')\n", "must define exactly one Pipeline; it defines 2"),
]


@pytest.mark.parametrize(("body", "message"), BROKEN)
def test_a_broken_pipeline_is_one_clear_error(tmp_path: Path, body: str, message: str) -> None:
    path = write_pipeline(tmp_path, body)
    with pytest.raises(PipelineError, match=message) as raised:
        load_pipeline(str(path))
    assert "\n" not in raised.value.message


def test_a_missing_pipeline_file_or_module(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="no such file"):
        load_pipeline(str(tmp_path / "nope.py"))
    with pytest.raises(PipelineError, match="no module no_such_pipeline_module"):
        load_pipeline("no_such_pipeline_module")


def test_selecting_unknown_jobs_names_the_known_ones() -> None:
    pipeline = Pipeline("p")
    a = pipeline.dataset("a", format="text", interval="PT5M")
    b = pipeline.dataset("b", format="text", interval="PT5M")
    pipeline.job(inputs=[a], output=b)(lambda a: a)
    with pytest.raises(InvalidInput, match="pipeline p has no job nope; jobs: <lambda>"):
        pipeline.select(["nope"])


def test_spark_settings_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOTLINE_SPARK_MASTER", raising=False)
    monkeypatch.delenv("LOTLINE_SPARK_CONF", raising=False)
    assert load_settings(tmp_path).spark_master == "local[*]"
    (tmp_path / "lotline.toml").write_text('LOTLINE_SPARK_MASTER = "spark://10.0.0.1:7077"\n')
    monkeypatch.setenv("LOTLINE_SPARK_CONF", "spark.executor.memory=2g, spark.sql.shuffle.partitions=64")
    settings = load_settings(tmp_path)
    assert settings.spark_master == "spark://10.0.0.1:7077"
    assert settings.spark_conf == (("spark.executor.memory", "2g"), ("spark.sql.shuffle.partitions", "64"))
    with pytest.raises(InvalidInput, match="'oops' is not of the form key=value"):
        parse_spark_conf("a=1,oops")


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[*]",
        "local[4]",
        "local[4,2]",
        "yarn",
        "spark://a:7077,b:7077",
        "k8s://https://k:443",
        "sc://localhost",
        "sc://10.0.0.1:15002/;token=abc;use_ssl=true",
        "sc://[::1]:443/;user_id=me",
        "sc://workspace.cloud.databricks.com:443/;token=t;x-databricks-cluster-id=0123-abc",
    ],
)
def test_spark_masters_pass_through(master: str) -> None:
    assert check_master(master) == master


@pytest.mark.parametrize("master", ["", "local[x]", "nowhere://spark", "mesos://m:5050", "spark:/a"])
def test_other_masters_are_refused(master: str) -> None:
    with pytest.raises(InvalidInput, match="is not a Spark master"):
        check_master(master)


@pytest.mark.parametrize(
    ("master", "why"),
    [
        ("sc://", "no host"),
        ("sc://host:99999", "port 99999 is out of range"),
        ("sc://host:x", "'host:x' is not host:port"),
        ("sc://host/token=abc", "parameters follow the host as /;name=value"),
        ("sc://host/;Bad Name=abc", "parameter name 'Bad Name' is not a gRPC header name"),
        ("sc://host/;token", "parameter 'token' is not name=value"),
    ],
)
def test_connect_urls_that_do_not_parse_are_refused_in_one_line(master: str, why: str) -> None:
    with pytest.raises(InvalidInput, match="is not a Spark Connect URL") as refused:
        check_master(master)
    assert why in refused.value.message and "\n" not in refused.value.message


def test_a_connect_url_is_shown_without_its_token() -> None:
    url = parse_url("sc://spark.example.com/;token=s3cret;use_ssl=true")
    assert (url.host, url.port, url.tls) == ("spark.example.com", 15002, True)
    assert url.shown == "sc://spark.example.com:15002/;token=***;use_ssl=true"
    with pytest.raises(InvalidInput) as refused:
        check_master("sc://h/;token=s3cret;Oops")
    assert "s3cret" not in refused.value.message


def test_a_token_means_tls_but_to_localhost(monkeypatch: pytest.MonkeyPatch) -> None:
    """As pyspark's client: a token to ``localhost`` goes over gRPC's local credentials (no TLS)."""
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    assert parse_url("sc://spark.example.com/;token=t").tls
    assert not parse_url("sc://localhost:15002/;token=t").tls
    assert parse_url("sc://localhost:15002/;token=t;use_ssl=true").tls
    assert not parse_url("sc://spark.example.com").tls
    monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", "t")  # pyspark sends it when the URL has none
    assert parse_url("sc://spark.example.com").tls


# No Spark 3 server is at hand: the decision is the version string's, tested alone; connect.start
# asks the server for ``spark.version`` and stops the session before raising it.
@pytest.mark.parametrize("version", ["4.0.0", "4.0.1-preview2", "4.3.0", "5.0", " 4.1.0 ", "10.0.0"])
def test_a_spark_4_server_is_accepted(version: str) -> None:
    check_version(version, "h:15002")


@pytest.mark.parametrize(
    ("version", "said"),
    [
        ("3.5.2", "runs Spark 3.5.2; lotline needs Spark 4.0 or newer."),
        ("3.5.0-databricks", "runs Spark 3.5.0-databricks; lotline needs Spark 4.0 or newer."),
        ("2.4", "runs Spark 2.4; lotline needs Spark 4.0 or newer."),
        ("", "reports Spark version '', not major.minor; lotline needs Spark 4.0 or newer."),
        ("unknown", "reports Spark version 'unknown', not major.minor; lotline needs Spark 4.0 or newer."),
    ],
)
def test_a_server_older_than_spark_4_is_one_line(version: str, said: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_version(version, "h:15002")
    assert refused.value.message == f"the Spark Connect server at h:15002 {said}"
