"""A group of journaled events applied set-wise (one transaction, group-level statements and caches)
projects exactly the rows that applying the same events one by one (a group of one) projects, on
both databases: with events of one run and one dataset inside a group, in order, with a run reading
what another run of the group wrote, and with a bad event in the middle (recorded, skipped)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from lotline.services import Lineage
from lotline.services.projection import ProjectionService
from lotline.store.engine import Store
from lotline.store.schema import (
    dataset_fields,
    dataset_versions,
    datasets,
    job_version_io,
    job_versions,
    jobs,
    lineage_events,
    namespaces,
    run_inputs,
    run_outputs,
    run_transitions,
    runs,
)
from support.ol import run_event

NS = "groups"
FIELDS = [{"name": "id", "type": "INT"}, {"name": "name", "type": "TEXT"}]


def _dataset(name: str, **facets: Any) -> dict[str, Any]:
    return {"namespace": NS, "name": name, "facets": facets}


def _schema(*names: str) -> dict[str, Any]:
    fields = [{"name": n, "type": "TEXT"} for n in names]
    return {"_producer": "p", "_schemaURL": "s", "fields": fields}


def _journal(*, bad: bool) -> list[dict[str, Any]]:
    """Runs interleaved, a run reading another's output, facets and fields changing mid-group, a
    parent, a failed run, late events, and (``bad``) a bad event in the middle."""
    a, b, c, d, parent = (str(uuid.UUID(int=i)) for i in range(1, 6))
    thief = run_event(NS, "thief", a, "COMPLETE", second=3, outputs=("loot",))
    b_start = run_event(NS, "reader", b, "START", second=4, inputs=("mid",))
    b_start["run"]["facets"]["parent"] = {
        "_producer": "p",
        "_schemaURL": "s",
        "run": {"runId": parent},
        "job": {"namespace": NS, "name": "orchestrator"},
    }
    with_schema = run_event(NS, "writer", a, "COMPLETE", second=5, outputs=("mid",))
    with_schema["outputs"][0]["facets"] = {"schema": _schema("id", "name")}
    return [
        run_event(NS, "writer", a, "START", second=1, inputs=("raw",)),
        run_event(NS, "writer", c, "START", second=1, inputs=("raw",)),
        run_event(
            NS, "writer", a, "RUNNING", second=2, facets={"step": {"_producer": "p", "_schemaURL": "s"}}
        ),
        *([thief] if bad else []),  # the same run under another job: refused, the group goes on
        with_schema,
        b_start,
        run_event(NS, "writer", c, "FAIL", second=6, outputs=("mid",)),
        run_event(NS, "reader", b, "COMPLETE", second=7, outputs=("final",)),
        run_event(NS, "writer", a, "FAIL", second=8),  # late: the run stays COMPLETED
        run_event(NS, "writer", d, "COMPLETE", second=9, inputs=("mid",), outputs=("mid",)),
        run_event(NS, "reader", str(uuid.UUID(int=6)), "START", second=10, inputs=("mid", "final")),
    ]


def _rows(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """What projection wrote, by name and content (ids of names are random; times of writing are the
    clock's), in a stable order."""
    ns_name = sa.select(namespaces.c.name).where(namespaces.c.id == datasets.c.namespace_id).scalar_subquery()
    ds = sa.select(datasets.c.id, (ns_name + ":" + datasets.c.name).label("ref")).subquery()
    job = sa.select(jobs.c.id, jobs.c.name).subquery()
    queries: dict[str, Any] = {
        "namespaces": sa.select(namespaces.c.name, namespaces.c.deleted_at),
        "datasets": sa.select(ds.c.ref, datasets.c.type, datasets.c.facets, datasets.c.description).join(
            ds, ds.c.id == datasets.c.id
        ),
        "fields": sa.select(
            ds.c.ref, dataset_fields.c.position, dataset_fields.c.name, dataset_fields.c.type
        ).join(ds, ds.c.id == dataset_fields.c.dataset_id),
        "jobs": sa.select(
            jobs.c.name, jobs.c.type, jobs.c.description, jobs.c.facets, jobs.c.current_version_id
        ),
        "job_versions": sa.select(job_versions.c.id, job.c.name, job_versions.c.location).join(
            job, job.c.id == job_versions.c.job_id
        ),
        "job_version_io": sa.select(job_version_io.c.job_version_id, ds.c.ref, job_version_io.c.role).join(
            ds, ds.c.id == job_version_io.c.dataset_id
        ),
        "runs": sa.select(
            runs.c.id,
            job.c.name,
            runs.c.job_version_id,
            runs.c.parent_run_id,
            runs.c.lot,
            runs.c.state,
            runs.c.started_at,
            runs.c.ended_at,
            runs.c.facets,
        ).join(job, job.c.id == runs.c.job_id),
        "transitions": sa.select(
            run_transitions.c.run_id, run_transitions.c.state, run_transitions.c.transitioned_at
        ),
        "versions": sa.select(
            dataset_versions.c.id,
            ds.c.ref,
            dataset_versions.c.version_number,
            dataset_versions.c.lot,
            dataset_versions.c.run_id,
            dataset_versions.c.state,
            dataset_versions.c.fields,
            dataset_versions.c.facets,
        ).join(ds, ds.c.id == dataset_versions.c.dataset_id),
        "journal": sa.select(
            lineage_events.c.id, lineage_events.c.applied_at.is_(None), lineage_events.c.projection_error
        ),
    }
    for name, table in (("inputs", run_inputs), ("outputs", run_outputs)):
        queries[name] = sa.select(table.c.run_id, ds.c.ref, table.c.lot, table.c.dataset_version_id).join(
            ds, ds.c.id == table.c.dataset_id
        )
    with store.read() as connection:
        return {name: sorted(connection.execute(q).all(), key=repr) for name, q in queries.items()}


def _project(url: str, group_size: int, journal: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    with Lineage.over(Store(url)) as lineage:
        accepted = lineage.openlineage.accept_batch(journal)
        assert accepted.refused == ()
        groups: list[int] = []
        ProjectionService(lineage.store, group_size=group_size, group_seconds=600).drain(
            on_group=lambda g: groups.append(len(g.applied) + len(g.failed))
        )
        assert max(groups) == min(group_size, len(journal))
        return _rows(lineage.store)


@pytest.mark.parametrize("bad", [False, True], ids=["all-good", "bad-in-the-middle"])
def test_a_group_applied_set_wise_projects_what_event_by_event_does(
    backend_url: str, new_database: Callable[[str], str], bad: bool
) -> None:
    backend = "postgresql" if backend_url.startswith("postgresql") else "sqlite"
    one_by_one = _project(backend_url, 1, _journal(bad=bad))
    grouped = _project(new_database(backend), 500, _journal(bad=bad))

    assert grouped == one_by_one
    errors = [(i, e) for i, _pending, e in one_by_one["journal"] if e is not None]
    if not bad:
        assert errors == []
        return
    [(failed, error)] = errors
    assert failed == 4 and "belongs to another job" in error
    mid = sorted(v[2:6] for v in one_by_one["versions"] if v[1] == f"{NS}:mid")
    assert mid == [
        (1, "", uuid.UUID(int=1), "superseded"),
        (2, "", uuid.UUID(int=3), "failed"),
        (3, "", uuid.UUID(int=4), "current"),
    ]


def _with_lots(dataset: str, side: str, *lots: str) -> dict[str, Any]:
    """A dataset entry naming the lots it reads or writes (the ``subset`` facet lotline emits)."""
    partitions = [{"identifier": lot, "dimensions": {"lot": lot}} for lot in lots]
    condition = {"type": "partition", "partitions": partitions}
    subset = {"_producer": "p", "_schemaURL": "s", f"{side}Condition": condition}
    return {"namespace": NS, "name": dataset, f"{side}Facets": {"subset": subset}}


def _lots_journal(*, bad: bool) -> list[dict[str, Any]]:
    """Output versions minted inside one group: two lots of one dataset written by one COMPLETE,
    the same lot written twice (the first version superseded within the group), a run reading a
    version written in the group, a failed version that supersedes nothing, several datasets
    written by one event, and (``bad``) a bad event in the middle."""
    e, f, g, h, thief = (str(uuid.UUID(int=i)) for i in range(11, 16))
    e_done = run_event(NS, "lotter", e, "COMPLETE", second=2)
    e_done["outputs"] = [_with_lots("parts", "output", "b", "a")]
    f_done = run_event(NS, "lotter", f, "COMPLETE", second=3)  # an unknown run: created and ended
    f_done["outputs"] = [_with_lots("parts", "output", "a")]
    g_start = run_event(NS, "reader", g, "START", second=4)
    g_start["inputs"] = [_with_lots("parts", "input", "a", "b")]
    g_failed = run_event(NS, "lotter", g, "FAIL", second=5)
    g_failed["job"]["name"] = "reader"
    g_failed["outputs"] = [_with_lots("parts", "output", "b")]
    h_done = run_event(NS, "lotter", h, "COMPLETE", second=6, outputs=("zeta", "alpha"))
    h_done["outputs"].append(_with_lots("parts", "output", "b"))
    stolen = run_event(NS, "other", e, "COMPLETE", second=5, outputs=("parts",))
    return [
        run_event(NS, "lotter", e, "START", second=1, inputs=("raw",)),
        e_done,
        f_done,
        g_start,
        *([stolen] if bad else []),  # a run reported under another job: refused, the group goes on
        g_failed,
        h_done,
        run_event(NS, "lotter", thief, "START", second=7, inputs=("parts", "alpha")),
    ]


@pytest.mark.parametrize("bad", [False, True], ids=["all-good", "bad-in-the-middle"])
def test_output_versions_minted_within_a_group_are_those_minted_event_by_event(
    backend_url: str, new_database: Callable[[str], str], bad: bool
) -> None:
    backend = "postgresql" if backend_url.startswith("postgresql") else "sqlite"
    one_by_one = _project(backend_url, 1, _lots_journal(bad=bad))
    grouped = _project(new_database(backend), 500, _lots_journal(bad=bad))

    assert grouped == one_by_one
    errors = [e for _i, _pending, e in one_by_one["journal"] if e is not None]
    assert len(errors) == bad
    parts = sorted(v[2:6] for v in one_by_one["versions"] if v[1] == f"{NS}:parts")
    e, f, g, h = (uuid.UUID(int=i) for i in range(11, 15))
    assert parts == [
        (1, "a", e, "superseded"),
        (2, "b", e, "superseded"),
        (3, "a", f, "current"),
        (4, "b", g, "failed"),
        (5, "b", h, "current"),
        (6, "", None, "current"),  # read at the whole dataset's lot, which no run wrote (rule 1)
    ]
    read = sorted((r[2], r[3]) for r in one_by_one["inputs"] if r[0] == g)
    versions_of = {(v[3], v[4]): v[0] for v in one_by_one["versions"]}
    assert read == sorted([("a", versions_of["a", f]), ("b", versions_of["b", e])])
