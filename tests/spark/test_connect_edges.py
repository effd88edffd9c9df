"""Spark Connect's edge cases (issue 41): a server that requires a token, a UDF whose helper
modules sit beside the pipeline file, shipped to the server with ``addArtifacts``, and ``spark.sql``
text over a lot's input, parsed on the client by openlineage-sql.

One server for the module, started from pyspark's distribution with ``spark.connect.authenticate.token``
(``support.connect_server``): every run here gives the token, or the wrong one. The client sends a
token over TLS unless the host is ``localhost``, where pyspark uses gRPC's local credentials (no
TLS), which the server's plain port accepts: the URLs name ``localhost``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from lotline.domain.coordination import Status
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from support.connect_server import connect_server
from support.processes import lotline
from support.spark import PIPELINES, ingest

pytestmark = [
    pytest.mark.connect,
    pytest.mark.slow,
    pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True),
]
TOKEN = secrets.token_hex(16)
LOT = "20230101PT30M000"
HELPED = PIPELINES / "shipped" / "helped.py"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of a Connect server that requires ``TOKEN``."""
    folder = tmp_path_factory.mktemp("spark-connect-token")
    with connect_server(folder, {"spark.connect.authenticate.token": TOKEN}) as url:
        yield int(url.rsplit(":", 1)[1])


def _run(lineage: Lineage, folder: Path, master: str, pipeline: Path = HELPED) -> tuple[int, str, str]:
    """``lotline run`` of ``pipeline`` on ``master``, a process of its own (this process's Spark is
    the suite's classic session), from a folder that is not the pipeline's."""
    done = lotline(
        "run",
        str(pipeline),
        cwd=folder,
        db_url=lineage.store.url,
        settings={"LOTLINE_SPARK_MASTER": master, "LOTLINE_WAREHOUSE": lineage.storage.root},
        timeout=300,
        process=True,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def helped(lineage: Lineage) -> Lineage:
    register(lineage, load_pipeline(str(HELPED)))
    ingest(
        lineage, "helped", "raw_logs", LOT, [["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /b/ 404"]]
    )
    return lineage


def test_a_udf_imports_modules_beside_the_pipeline_file_on_the_server(
    helped: Lineage, port: int, tmp_path: Path
) -> None:
    """``pagenames`` and the ``pathstyle`` it imports exist only beside ``helped.py``: the server's
    Python workers import them from the artifacts lotline shipped before the first lot."""
    code, stdout, stderr = _run(helped, tmp_path, f"sc://localhost:{port}/;token={TOKEN}")
    assert code == 0, stdout[-2000:] + stderr[-2000:]
    (status,) = helped.lots.status("helped", job="name_pages")
    assert status.status is Status.READY, status
    manifest = helped.manifests.current("helped", "pages", LOT)
    assert manifest is not None
    import pyarrow.parquet as pq

    pages = [
        row for o in manifest.objects for row in pq.read_table(o.uri.removeprefix("file://")).column("page")
    ]
    assert sorted(p.as_py() for p in pages) == ["page:A", "page:B"]


@pytest.mark.parametrize(
    ("host", "given", "refused"),
    [
        (
            "localhost",
            ";token=wrong-token",
            "refused the client: UNAUTHENTICATED (Invalid authentication token); check the URL's token=",
        ),
        (
            "localhost",
            "",
            "refused the client: UNAUTHENTICATED (No authentication token provided); "
            "it requires a token (sc://host:port/;token=…)",
        ),
        # The right token, but to 127.0.0.1: pyspark then speaks TLS, which this server does not.
        ("127.0.0.1", f";token={TOKEN}", "does not answer over TLS"),
    ],
    ids=["wrong", "none", "tls"],
)
def test_a_refused_client_is_one_line_naming_the_server_and_nothing_is_claimed(
    helped: Lineage, port: int, tmp_path: Path, host: str, given: str, refused: str
) -> None:
    code, _, stderr = _run(helped, tmp_path, f"sc://{host}:{port}/{given}")
    assert code == 2
    assert stderr.startswith(f"lotline: error: the Spark Connect server at {host}:{port} {refused}")
    assert stderr.count("\n") == 1, stderr
    assert TOKEN not in stderr and "wrong-token" not in stderr
    assert helped.lots.counts("helped", "name_pages") == {}  # no lot was claimed
    assert helped.runs.list_runs("helped", "name_pages").items == []


def test_spark_sql_text_gets_its_reads_and_column_sources_on_connect(
    lineage: Lineage, port: int, tmp_path: Path
) -> None:
    """``spark.sql("… FROM {split}", split=frame)``: openlineage-sql parses the text on the client;
    the frame's plan comes with it, so the written columns trace back to the input's ``value``,
    as a DIRECT source without subtype (openlineage-sql gives none), which the run says."""
    sqltext = PIPELINES / "sqltext.py"
    register(lineage, load_pipeline(str(sqltext)))
    ingest(
        lineage, "sqltext", "raw_logs", LOT, [["2023-01-01T00:01:00 /a 200", "2023-01-01T00:02:00 /a 404"]]
    )
    code, stdout, stderr = _run(lineage, tmp_path, f"sc://localhost:{port}/;token={TOKEN}", sqltext)
    assert code == 0, stdout[-2000:] + stderr[-2000:]
    events = lineage.openlineage.list_events(job_namespace="sqltext", limit=100).items
    [complete] = [e for e in events if e["eventType"] == "COMPLETE" and e["job"]["name"] == "count_pages"]
    fields = complete["outputs"][0]["facets"]["columnLineage"]["fields"]
    [source] = fields["page"]["inputFields"]
    assert source == {
        "namespace": "sqltext",
        "name": "raw_logs",
        "field": "value",
        "transformations": [{"type": "DIRECT", "description": "", "masking": False}],  # no subtype
    }
    assert fields["hits"]["inputFields"] == []
    assert complete["run"]["facets"]["lotline_capture"]["notCaptured"] == [
        "spark.sql text: its columns' sources are captured without their subtype"
    ]
