"""Spark Connect (``LOTLINE_SPARK_MASTER=sc://…``): one behaviour, proven on both modes.

The demo's pipeline with an undeclared lookup (``support.both_modes``: a lot that fails on a broken
line and is redone, a ``warn`` check, an hourly aggregation, a join with a CSV the transform opens
itself) runs once on the suite's classic ``local[1]`` session, in this process, and once on a Spark
Connect server started from pyspark's own distribution (``connect_url``), in a process of its own.
The OpenLineage events of the two runs are equal — reads, undeclared reads, column lineage, schemas,
statistics, quality facets, failures — but for what names the Spark application and the run ids.
The runner's acceptance scenarios with several outputs (``support.several_outputs``: checks that
drop, warn and fail; a failed part retried; ``lotline run`` SIGKILLed mid-write and redone) and
Ctrl-C (``support.waiting``: the lot fails as interrupted, the server's task stops, the next run redoes
it) run on Connect with the code their classic tests run, and observe what classic mode observes.
The Connect run counts the requests its client sends: a write and its schema per lot, no more.
Bad input: an unreachable server is one line naming host and port, before anything is claimed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lotline.domain.model import DatasetRef
from lotline.services import open_lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.storage.objects import Storage
from support import both_modes, several_outputs
from support.connect_server import free_port
from support.databases import ON_POSTGRESQL
from support.processes import lotline
from support.waiting import interrupted_and_redone

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.connect, pytest.mark.slow]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: What differs by mode: the application (master, id, a Connect session's id) and the stack.
_BY_MODE = ("spark_applicationDetails",)


def _normalized(folder: Path, namespace: str) -> list[dict[str, Any]]:
    """The namespace's events in the folder's database, in order, with what differs by mode or by
    run taken out: run ids, the folder, event times, the application, stack traces."""
    with open_lineage(f"sqlite:///{folder / 'lineage.db'}", Storage(str(folder / "warehouse"))) as lineage:
        page = lineage.openlineage.list_events(job_namespace=namespace, limit=1000, sort_direction="asc")
        events = list(page.items)
    found: list[dict[str, Any]] = json.loads(
        _UUID.sub("<uuid>", json.dumps(events).replace(str(folder), "<folder>"))
    )
    for event in found:
        event.pop("eventTime")
        facets = event["run"]["facets"]
        for facet in _BY_MODE:
            facets.pop(facet, None)
        facets.get("errorMessage", {}).pop("stackTrace", None)  # py4j's frames, or gRPC's
    return found


def _events(folder: Path) -> dict[tuple[str, str, str, int | None], dict[str, Any]]:
    """The demo scenario's events by (job, lot, type, attempt)."""
    found = {}
    for event in _normalized(folder, both_modes.NS):
        facets = event["run"]["facets"]
        lot = facets.get("lotline_lot", {})
        name = lot.get("lot") or facets["nominalTime"]["nominalStartTime"]
        if not str(name).startswith(("2023", "20230101")):
            continue  # the arrival policy's empty lots up to the wall clock's now: not the scenario's
        found[(event["job"]["name"], name, event["eventType"], lot.get("attempt"))] = event
    return found


def _sorted_events(folder: Path, namespace: str) -> list[str]:
    """``_normalized``, each as canonical JSON, sorted: child runs' parts may run in either order."""
    return sorted(json.dumps(e, sort_keys=True) for e in _normalized(folder, namespace))


def _on_connect(module: str, *args: str) -> None:
    """``python -m support.<module> ARGS``: a process of its own, whose session is on Connect."""
    tests = Path(__file__).parent.parent
    done = subprocess.run(
        [sys.executable, "-m", f"support.{module}", *args],
        cwd=tests,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_demo_pipeline_gives_the_same_lineage_on_classic_and_on_connect(
    spark: SparkSession, connect_url: str, tmp_path: Path
) -> None:
    classic, connect = tmp_path / "classic", tmp_path / "connect"
    for folder in (classic, connect):
        folder.mkdir()
        both_modes.prepare(folder)
    with open_lineage(f"sqlite:///{classic / 'lineage.db'}", Storage(str(classic / "warehouse"))) as lineage:
        first, second = both_modes.run(lineage, spark, classic)
        assert first.failed and not second.failed  # the broken line, then its fixed file
    _on_connect("both_modes", connect_url, f"sqlite:///{connect / 'lineage.db'}", str(connect))
    # What the lots asked of the server (docs/deploy.md "Round trips per lot"): each write, its
    # written schema, and one schema per distinct read whose schema is not fixed: hits' and
    # hourly_hits' declared schemas and the lookup's CSV at one path. Nothing else: the row count
    # and the checks' metrics come in the write's response (no ``isStreaming`` question either).
    asked = json.loads((connect / "requests.json").read_text())
    assert set(asked) == {"execute:write_operation", "analyze:schema"}, asked
    assert asked["analyze:schema"] == asked["execute:write_operation"] + 3, asked

    on_classic, on_connect = _events(classic), _events(connect)
    assert sorted(on_classic) == sorted(on_connect)
    for key, event in on_classic.items():
        assert on_connect[key] == event, key

    # What the equality covers, on both: the lot that failed on its broken line and was redone,
    # the check's warning, the lookup read by ``label`` without declaring it, column lineage.
    failed = [e for (job, _, kind, _), e in on_connect.items() if job == "parse" and kind == "FAIL"]
    assert len(failed) == 1
    assert "malformed log line" in failed[0]["run"]["facets"]["errorMessage"]["message"]
    [label] = [e for (job, lot, kind, _), e in on_connect.items() if (job, kind) == ("label", "COMPLETE")][:1]
    lineage_facet = label["outputs"][0]["facets"]["columnLineage"]["fields"]
    lookup = {"namespace": "file", "name": "<folder>/lookups/statuses", "field": "label"}
    assert [{k: f[k] for k in lookup} for f in lineage_facet["outcome"]["inputFields"]] == [lookup]
    assert {f["transformations"][0]["subtype"] for f in lineage_facet["bytes"]["inputFields"]} == {"IDENTITY"}
    for folder in (classic, connect):  # the undeclared read: an input of the job, marked, on both
        with open_lineage(
            f"sqlite:///{folder / 'lineage.db'}", Storage(str(folder / "warehouse"))
        ) as lineage:
            read = DatasetRef("file", str(folder / "lookups" / "statuses"))
            assert lineage.catalog.get_job(both_modes.NS, "label").undeclared_inputs == (read,)
    hourly = [
        e for (job, _, kind, _), e in on_connect.items() if (job, kind) == ("hourly_counts", "COMPLETE")
    ]
    assert (
        hourly and hourly[0]["outputs"][0]["facets"]["columnLineage"]["fields"]["hits"]["inputFields"] == []
    )
    warned = [e for (job, _, kind, _), e in on_connect.items() if (job, kind) == ("parse", "COMPLETE")]
    assert all("dataQualityAssertions" in e["outputs"][0]["facets"] for e in warned)


def test_several_outputs_with_checks_and_a_failed_part_retried_give_on_connect_what_classic_gives(
    spark: SparkSession, connect_url: str, tmp_path: Path
) -> None:
    """Two acceptance scenarios of the runner, the same code on both modes (``support.several_outputs``):
    a job with two outputs and drop, warn and fail checks; child work whose failed part is retried."""
    classic = {}
    for scenario in (several_outputs.checked_outputs, several_outputs.retried_part):
        place = tmp_path / "classic" / scenario.__name__
        place.mkdir(parents=True)
        with open_lineage(f"sqlite:///{place / 'lineage.db'}", Storage(str(place / "warehouse"))) as lineage:
            classic[scenario.__name__] = scenario(lineage, spark)
    connect = tmp_path / "connect"
    connect.mkdir()
    _on_connect("several_outputs", connect_url, str(connect))
    on_connect = json.loads((connect / "observed.json").read_text())

    assert on_connect == json.loads(json.dumps(classic, default=str))
    events = {s: _sorted_events(tmp_path / "classic" / s, several_outputs.CHECKED_NS) for s in classic}
    for scenario, on_classic in events.items():  # and so are their OpenLineage events
        assert _sorted_events(connect / scenario, several_outputs.CHECKED_NS) == on_classic
    assert sum('"dataQualityAssertions"' in e for e in events["checked_outputs"]) == 1  # sizes' COMPLETE
    # What the equality covers, on both: the fail check published neither output, the drop checks
    # quarantined their rows, the warn check marked its output, every check's facet; the retry ran
    # only the failed part and left the other's objects as they were.
    checked, parts = on_connect["checked_outputs"], on_connect["retried_part"]
    assert checked["failed"]["first"]["status"] == [
        "ERROR",
        "output second: check n < 100 failed: 1 of 3 rows",
    ]
    assert checked["rows"]["low__quarantine"] == [[None, "n IS NOT NULL"]]
    assert checked["rows"]["high__quarantine"] == [[20, "n <> 20"]]
    assert [checked["facets"][d]["warned"] for d in ("low", "high")] == [False, True]
    assert checked["checks"]["warnings"] == ["n < 100"]
    assert parts["parts"] == {"kept": ["part=00000"], "ran": ["part=00001"], "failed": []}
    assert parts["kept"] == {"evens": [[1, "complete"]], "odds": [[1, "complete"]]}
    assert parts["kept untouched"]


@pytest.mark.parametrize("backend_url", ON_POSTGRESQL, indirect=True)
def test_a_lot_killed_mid_write_on_connect_is_redone_by_the_next_run(
    backend_url: str, connect_url: str, tmp_path: Path
) -> None:
    """The classic test's scenario (``test_several_outputs``) with ``lotline run`` on ``sc://``: the
    client is SIGKILLed while its second output is written (the server may finish that write: it
    is never listed), and the next run publishes both outputs from attempt 2."""
    several_outputs.killed_between_writes(backend_url, tmp_path, connect_url)


@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_ctrl_c_on_connect_interrupts_the_server_s_task_and_the_next_run_redoes_the_lot(
    backend_url: str, connect_url: str, tmp_path: Path
) -> None:
    """The classic test's scenario (``test_interrupt``) with ``lotline run`` on ``sc://``: Ctrl-C
    fails the lot as interrupted in one line, exit 130, and the server stops the lot's task (its
    Python worker ends) instead of running it on, detached, as it does for a killed client."""
    interrupted_and_redone(backend_url, tmp_path, connect_url)


def test_an_unreachable_connect_server_is_one_line_before_any_claim(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    db_url = f"sqlite:///{tmp_path / 'lineage.db'}"
    both_modes.prepare(tmp_path)
    pipeline = tmp_path / "weblogs.py"
    pipeline.write_text(both_modes.DEMO.read_text())
    with open_lineage(db_url, Storage(str(tmp_path / "warehouse"))) as lineage:
        register(lineage, load_pipeline(str(pipeline)))
        both_modes.ingest(lineage, tmp_path, "weblogs")
    refused = lotline(
        "run",
        str(pipeline),
        cwd=tmp_path,
        db_url=db_url,
        settings={
            "LOTLINE_SPARK_MASTER": f"sc://127.0.0.1:{port}",
            "LOTLINE_WAREHOUSE": str(tmp_path / "warehouse"),
        },
        process=True,  # in this process, the suite's classic session would be found instead
    )
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"lotline: error: cannot reach the Spark Connect server at 127.0.0.1:{port}: Connection refused"
    )
    with open_lineage(db_url, Storage(str(tmp_path / "warehouse"))) as lineage:
        assert lineage.lots.counts("weblogs", "parse") == {}  # no lot of parse was ever claimed
        assert lineage.runs.list_runs("weblogs", "parse").items == []
        assert lineage.sources.eligible("weblogs", ["parse"])["parse"] > 0  # though there was work
