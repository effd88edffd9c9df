"""OpenLineage events as producers send them, for tests that journal and project them."""

from __future__ import annotations

from typing import Any

PRODUCER = "https://lotline.test/tests"
RUN_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"


def run_event(
    ns: str,
    job: str,
    run_id: str,
    event_type: str,
    *,
    second: int = 0,
    inputs: tuple[str, ...] = (),
    outputs: tuple[str, ...] = (),
    facets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "eventType": event_type,
        "eventTime": f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}Z",
        "producer": PRODUCER,
        "schemaURL": RUN_SCHEMA,
        "run": {"runId": run_id, "facets": facets or {}},
        "job": {"namespace": ns, "name": job},
        "inputs": [{"namespace": ns, "name": name} for name in inputs],
        "outputs": [{"namespace": ns, "name": name} for name in outputs],
    }


def step_facet(step: int) -> dict[str, Any]:
    return {"step": {"_producer": PRODUCER, "_schemaURL": "https://lotline.test/step", "n": step}}


def run_history(ns: str, job: str, run_id: str, steps: int) -> list[dict[str, Any]]:
    """START, ``steps`` OTHER events that each replace the run's ``step`` facet, COMPLETE, then a
    late FAIL: applied in order, the run ends COMPLETED with the last step's facet; in any other
    order it would not."""
    history = [run_event(ns, job, run_id, "START", inputs=(f"{job}-in",))]
    history += [
        run_event(ns, job, run_id, "OTHER", second=i + 1, facets=step_facet(i + 1)) for i in range(steps)
    ]
    history.append(run_event(ns, job, run_id, "COMPLETE", second=steps + 1, outputs=(f"{job}-out",)))
    history.append(run_event(ns, job, run_id, "FAIL", second=steps + 2))
    return history
