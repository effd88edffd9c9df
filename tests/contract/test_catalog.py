"""Namespaces, sources, datasets and jobs: upserts, listing, and bad input that changes nothing."""

from __future__ import annotations

import uuid

import pytest

from lotline.domain.errors import InvalidInput, InvalidName, NotFound
from lotline.domain.model import DatasetRef, FieldSpec
from lotline.services import Lineage

NAMES_WITH_SEPARATORS = ["postgres://db:5432", "s3://bucket/key/part=1", "a:b:c"]


def test_namespace_upsert_get_and_list(lineage: Lineage) -> None:
    first = lineage.catalog.upsert_namespace("ns", owner_name="me", description="first")
    again = lineage.catalog.upsert_namespace("ns", owner_name="you")
    assert (again.owner_name, again.description, again.created_at) == ("you", "first", first.created_at)
    for name in NAMES_WITH_SEPARATORS:
        lineage.catalog.upsert_namespace(name)
    page = lineage.catalog.list_namespaces(limit=2)
    assert page.total_count == 4
    assert [n.name for n in page.items] == sorted(["ns", *NAMES_WITH_SEPARATORS])[:2]
    with pytest.raises(NotFound, match=r"Namespace 'other' not found\."):
        lineage.catalog.get_namespace("other")


@pytest.mark.parametrize("bad", ["", "  ", "a\nb", "x\x00", "../up", "a/../b", "x" * 1025])
def test_invalid_names_are_rejected_and_change_nothing(lineage: Lineage, bad: str) -> None:
    with pytest.raises(InvalidName):
        lineage.catalog.upsert_namespace(bad)
    lineage.catalog.upsert_namespace("ns")
    with pytest.raises(InvalidName):
        lineage.catalog.upsert_dataset("ns", bad)
    with pytest.raises(InvalidName):
        lineage.catalog.upsert_job("ns", bad)
    assert lineage.catalog.list_namespaces().total_count == 1
    assert lineage.catalog.list_datasets("ns").total_count == 0
    assert lineage.catalog.list_jobs("ns").total_count == 0


def test_a_nul_character_in_a_description_or_a_facet_is_refused_and_changes_nothing(lineage: Lineage) -> None:
    """Issue 29.12: PostgreSQL refuses NUL in text and JSON; SQLite refuses it the same way."""
    lineage.catalog.upsert_namespace("ns")
    facet = {"_producer": "p", "_schemaURL": "s"}
    attempts = [
        lambda: lineage.catalog.upsert_namespace("ns", description="a\x00b"),
        lambda: lineage.catalog.upsert_dataset("ns", "d", description="a\x00b"),
        lambda: lineage.catalog.upsert_dataset("ns", "d", facets={"f": {**facet, "text": "a\x00b"}}),
        lambda: lineage.catalog.upsert_dataset("ns", "d", facets={"f": {**facet, "list": [{"k\x00": 1}]}}),
        lambda: lineage.catalog.upsert_job("ns", "j", description="a\x00b"),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidInput, match="rejected by the database"):
            attempt()
    assert lineage.catalog.get_namespace("ns").description is None
    assert lineage.catalog.list_datasets("ns").total_count == 0
    assert lineage.catalog.list_jobs("ns").total_count == 0
    # A backslash followed by "u0000" is six ordinary characters.
    kept = lineage.catalog.upsert_dataset("ns", "d", facets={"f": {**facet, "text": "\\u0000"}})
    assert kept.facets["f"]["text"] == "\\u0000"


def test_sources(lineage: Lineage) -> None:
    lineage.catalog.upsert_source("warehouse", "POSTGRESQL", "postgres://db:5432/wh")
    updated = lineage.catalog.upsert_source("warehouse", "POSTGRESQL", description="main")
    assert (updated.connection_url, updated.description) == ("postgres://db:5432/wh", "main")
    assert lineage.catalog.list_sources().total_count == 1
    with pytest.raises(InvalidInput, match="type"):
        lineage.catalog.upsert_source("s", "")
    with pytest.raises(NotFound, match="Source 'nope'"):
        lineage.catalog.get_source("nope")


def test_dataset_metadata_fields_and_facets(lineage: Lineage) -> None:
    lineage.catalog.upsert_namespace("ns")
    lineage.catalog.upsert_source("fs", "LOCAL", "file:///data")
    name = "s3://bucket/path:with/colons"
    created = lineage.catalog.upsert_dataset(
        "ns",
        name,
        source="fs",
        fields=[FieldSpec("id", "INT"), FieldSpec("v", "STRING", "value")],
        facets={"a": {"x": 1}},
        description="d",
    )
    assert (created.source_name, created.physical_name, created.current_version) == ("fs", name, None)
    updated = lineage.catalog.upsert_dataset("ns", name, fields=[FieldSpec("id", "BIGINT")], facets={"b": {}})
    assert updated.fields == (FieldSpec("id", "BIGINT"),)
    assert updated.facets == {"a": {"x": 1}, "b": {}}
    assert (updated.description, updated.source_name) == ("d", "fs")
    assert lineage.catalog.get_dataset("ns", name) == updated


def test_dataset_bad_references_change_nothing(lineage: Lineage) -> None:
    with pytest.raises(NotFound, match="Namespace 'ns'"):
        lineage.catalog.upsert_dataset("ns", "d")
    lineage.catalog.upsert_namespace("ns")
    with pytest.raises(NotFound, match="Source 'nope'"):
        lineage.catalog.upsert_dataset("ns", "d", source="nope")
    with pytest.raises(InvalidInput, match="type"):
        lineage.catalog.upsert_dataset("ns", "d", type="TABLE")
    with pytest.raises(InvalidInput, match="distinct"):
        lineage.catalog.upsert_dataset("ns", "d", fields=[FieldSpec("a"), FieldSpec("a")])
    assert lineage.catalog.list_datasets("ns").total_count == 0


def test_job_versions_follow_inputs_outputs_and_location(lineage: Lineage) -> None:
    lineage.catalog.upsert_namespace("ns")
    for name in ("a", "b", "c"):
        lineage.catalog.upsert_dataset("ns", name)
    a, b, c = (DatasetRef("ns", n) for n in "abc")
    v1 = lineage.catalog.upsert_job("ns", "job", inputs=[a], outputs=[b], location="git://x@1")
    same = lineage.catalog.upsert_job(
        "ns", "job", inputs=[a], outputs=[b], location="git://x@1", description="d"
    )
    v2 = lineage.catalog.upsert_job("ns", "job", inputs=[a, c], outputs=[b], location="git://x@1")
    v3 = lineage.catalog.upsert_job("ns", "job", inputs=[a, c], outputs=[b], location="git://x@2")
    assert v1.current_version == same.current_version
    assert len({v1.current_version, v2.current_version, v3.current_version}) == 3
    assert (v3.inputs, v3.outputs, v3.location, v3.description) == ((a, c), (b,), "git://x@2", "d")
    versions = lineage.catalog.list_job_versions("ns", "job")
    assert versions.total_count == 3
    back = lineage.catalog.upsert_job("ns", "job", inputs=[a], outputs=[b], location="git://x@1")
    assert back.current_version == v1.current_version
    assert lineage.catalog.list_job_versions("ns", "job").total_count == 3
    assert v2.current_version is not None
    found = lineage.catalog.get_job_version("ns", "job", v2.current_version)
    assert (found.inputs, found.outputs, found.location) == ((a, c), (b,), "git://x@1")
    with pytest.raises(NotFound, match="Job version"):
        lineage.catalog.get_job_version("ns", "job", uuid.uuid4())
    with pytest.raises(NotFound, match="Job version"):
        lineage.catalog.get_job_version("ns", "other-job", v2.current_version)


def test_job_with_unknown_dataset_is_not_found_and_not_created(lineage: Lineage) -> None:
    lineage.catalog.upsert_namespace("ns")
    with pytest.raises(NotFound, match="Dataset 'ns:missing'"):
        lineage.catalog.upsert_job("ns", "job", inputs=[DatasetRef("ns", "missing")])
    with pytest.raises(InvalidInput, match="type"):
        lineage.catalog.upsert_job("ns", "job", type="CRON")
    assert lineage.catalog.list_jobs().total_count == 0


def test_jobs_are_listed_across_namespaces(lineage: Lineage) -> None:
    for ns in ("one", "two"):
        lineage.catalog.upsert_namespace(ns)
        lineage.catalog.upsert_job(ns, f"job-{ns}")
    assert [j.name for j in lineage.catalog.list_jobs().items] == ["job-one", "job-two"]
    assert [j.name for j in lineage.catalog.list_jobs("two").items] == ["job-two"]


def test_a_dataset_and_its_tags_are_written_together(lineage: Lineage) -> None:
    """Issue 15, point 7: ``PUT dataset`` with tags is one transaction — a tag on a field the
    dataset does not have is NotFound and nothing is written (it used to commit the dataset first)."""
    lineage.catalog.upsert_namespace("ns")
    fields = [FieldSpec("a", "INT")]
    with pytest.raises(NotFound, match="ns:tagged:b"):
        lineage.catalog.upsert_dataset(
            "ns", "tagged", fields=fields, tags=["PII"], field_tags={"b": ["SENSITIVE"]}
        )
    with pytest.raises(NotFound):
        lineage.catalog.get_dataset("ns", "tagged")
    assert [t.name for t in lineage.tags.list_tags().items if t.name in ("PII", "SENSITIVE")] == []
    with pytest.raises(InvalidName):
        lineage.catalog.upsert_dataset("ns", "tagged", tags=["bad\ttag"])
    with pytest.raises(NotFound):
        lineage.catalog.get_dataset("ns", "tagged")

    lineage.catalog.upsert_dataset(
        "ns", "tagged", fields=fields, tags=["PII"], field_tags={"a": ["SENSITIVE"]}
    )
    tags = lineage.tags.dataset_tags([("ns", "tagged")])[("ns", "tagged")]
    assert (tags.tags, dict(tags.field_tags)) == (("PII",), {"a": ("SENSITIVE",)})
