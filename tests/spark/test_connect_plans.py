"""The Spark Connect plan walk (``spark.connect_plans``) on hand-built protobuf relations, no server:
what it cannot resolve is named, never guessed, and a file read's schema is asked only when the
relation does not give it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lotline.spark.connect_plans import connect_facts
from lotline.spark.plans import Transformation, write_plan


def _relations() -> Any:
    from pyspark.sql.connect.proto import relations_pb2

    return relations_pb2


def _read(format: str, paths: list[str], schema: str | None = None) -> Any:
    r = _relations()
    source = r.Read.DataSource(format=format, paths=paths)
    if schema is not None:
        source.schema = schema
    return r.Relation(read=r.Read(data_source=source))


def _attribute(name: str) -> Any:
    from pyspark.sql.connect.proto import expressions_pb2 as e

    return e.Expression(unresolved_attribute=e.Expression.UnresolvedAttribute(unparsed_identifier=name))


def test_spark_sql_text_is_named_as_not_captured_and_its_columns_get_no_sources() -> None:
    r = _relations()
    relation = r.Relation(sql=r.SQL(query="SELECT path FROM parquet.`/data/hits`"))
    asked: list[tuple[str, ...]] = []
    found = connect_facts(relation, ["path"], lambda *a: asked.append(a[3]) or ())  # type: ignore[func-returns-value]
    assert found.gaps == [
        "spark.sql text: its reads and column lineage are not captured on Spark Connect",
        "the written columns (1) and the plan's (0) differ",
    ]
    assert write_plan(found.facts).columns == {} and asked == []


def test_a_read_s_schema_is_asked_only_when_the_relation_does_not_declare_one() -> None:
    asked: list[tuple[str, str, Mapping[str, str], tuple[str, ...]]] = []

    def schema_of(format: str, schema: str, options: Mapping[str, str], paths: tuple[str, ...]) -> Any:
        asked.append((format, schema, options, paths))
        return (("status", "string"), ("label", "string"))

    r = _relations()
    lookup = _read("csv", ["/lookups/statuses"])
    project = r.Project(input=lookup, expressions=[_attribute("label"), _attribute("nope")])
    found = connect_facts(r.Relation(project=project), ["label", "nope"], schema_of)
    assert asked == [("csv", "", {}, ("/lookups/statuses",))]
    assert found.gaps == ["column nope is not resolved"]
    plan = write_plan(found.facts)
    assert plan.reads[0].uris == ("file:/lookups/statuses",)
    [source] = plan.columns["label"]
    assert (source.field, source.transformation) == ("label", Transformation.IDENTITY)
