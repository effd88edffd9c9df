"""Lists read in a fixed number of statements, whatever their length (issue 15, point 7): a page of
jobs with everything Marquez shows of them (inputs, outputs, location, parent, tags, facets, latest
run), and a page of job versions. Counted on the store's engine, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from lotline.domain.model import DatasetRef, FieldSpec
from lotline.domain.runs import RunAction
from lotline.services import Lineage

NS = "statements"


@contextmanager
def _counted(lineage: Lineage) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    engine = lineage.store.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


def _statements_for_a_page(lineage: Lineage) -> int:
    with _counted(lineage) as seen:
        page = lineage.catalog.list_jobs(NS, limit=100)
        latest = lineage.runs.latest_runs([(j.namespace, j.name) for j in page.items])
    assert all((j.namespace, j.name) in latest for j in page.items)
    assert all(j.inputs and j.outputs and j.location and j.tags == ("NIGHTLY",) for j in page.items)
    return len(seen)


def test_a_page_of_jobs_costs_the_same_statements_for_3_or_12_jobs(lineage: Lineage) -> None:
    lineage.catalog.upsert_namespace(NS)
    _jobs(lineage, 0, 3)
    few = _statements_for_a_page(lineage)
    _jobs(lineage, 3, 12)
    many = _statements_for_a_page(lineage)
    assert many == few, f"{few} statements for 3 jobs, {many} for 12"


def _jobs(lineage: Lineage, start: int, stop: int) -> None:
    """Jobs ``start``..``stop - 1``, each with an input, an output, a location, a tag and a run."""
    catalog = lineage.catalog
    for index in range(start, stop):
        for name in (f"in{index}", f"out{index}"):
            catalog.upsert_dataset(NS, name)
        catalog.upsert_job(
            NS,
            f"job{index}",
            inputs=[DatasetRef(NS, f"in{index}")],
            outputs=[DatasetRef(NS, f"out{index}")],
            location=f"git://job{index}",
        )
        lineage.tags.tag_job(NS, f"job{index}", "NIGHTLY")
        run = lineage.runs.create_run(NS, f"job{index}", run_id=uuid.uuid4())
        lineage.runs.transition(run.id, RunAction.START)


def test_a_page_of_job_versions_costs_the_same_statements_for_2_or_8_versions(lineage: Lineage) -> None:
    catalog = lineage.catalog
    catalog.upsert_namespace(NS)
    catalog.upsert_dataset(NS, "in")

    def versions(count: int) -> int:
        for index in range(count):
            catalog.upsert_job(
                NS, "job", inputs=[DatasetRef(NS, "in")], location=f"git://v{uuid.uuid4()}-{index}"
            )
        with _counted(lineage) as seen:
            found = catalog.list_job_versions(NS, "job", limit=100)
        assert all(v.inputs == (DatasetRef(NS, "in"),) for v in found.items)
        return len(seen)

    few = versions(2)
    many = versions(6)
    assert many == few, f"{few} statements for 2 versions, {many} for 8"


def test_a_page_of_dataset_versions_with_their_runs_costs_the_same_statements_for_2_or_8(
    lineage: Lineage,
) -> None:
    catalog = lineage.catalog
    catalog.upsert_namespace(NS)
    catalog.upsert_dataset(NS, "out")
    catalog.upsert_job(NS, "writer", outputs=[DatasetRef(NS, "out")])

    def versions(count: int) -> int:
        for _ in range(count):
            run = lineage.runs.create_run(NS, "writer", run_id=uuid.uuid4())
            lineage.runs.transition(run.id, RunAction.START)
            lineage.runs.transition(run.id, RunAction.COMPLETE)
        with _counted(lineage) as seen:
            page = lineage.versions.list_versions(NS, "out", limit=100)
            made_by = lineage.runs.get_runs([v.run_id for v in page.items if v.run_id is not None])
        assert all(v.run_id in made_by for v in page.items)
        return len(seen)

    few = versions(2)
    many = versions(6)
    assert many == few, f"{few} statements for 2 versions, {many} for 8"


def test_a_page_of_datasets_with_their_tags_costs_the_same_statements_for_3_or_12(lineage: Lineage) -> None:
    catalog = lineage.catalog
    catalog.upsert_namespace(NS)

    def datasets(start: int, stop: int) -> int:
        for index in range(start, stop):
            fields = [FieldSpec("a", "INT"), FieldSpec("b", "STRING")]
            catalog.upsert_dataset(NS, f"d{index}", fields=fields, tags=["PII"], field_tags={"a": ["KEY"]})
        with _counted(lineage) as seen:
            page = catalog.list_datasets(NS, limit=100)
            tags = lineage.tags.dataset_tags([(d.namespace, d.name) for d in page.items])
        assert all(len(d.fields) == 2 for d in page.items)
        assert all(t.tags == ("PII",) for t in tags.values())
        return len(seen)

    few = datasets(0, 3)
    many = datasets(3, 12)
    assert many == few, f"{few} statements for 3 datasets, {many} for 12"
