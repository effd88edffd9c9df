"""The Spark Connect plan walk (``spark.connect_plans``) on hand-built protobuf relations, no server:
what it cannot resolve is named, never guessed, and a file read's schema is asked only when the
relation does not give it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lotline.domain.model import DatasetRef
from lotline.spark.connect_plans import connect_facts
from lotline.spark.plans import ColumnSource, Transformation, write_plan
from lotline.spark.reads import NamedRead, column_lineage_facet


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


def _hits_schema(asked: list[Any]) -> Any:
    def schema_of(format: str, schema: str, options: Mapping[str, str], paths: tuple[str, ...]) -> Any:
        asked.append((format, schema, dict(options), paths))
        return (("path", "string"), ("status", "int"), ("bytes", "long"))

    return schema_of


def _sql(query: str) -> Any:
    r = _relations()
    return r.Relation(sql=r.SQL(query=query))


def test_spark_sql_text_over_files_gives_its_reads_and_column_sources_from_openlineage_sql() -> None:
    """openlineage-sql names the file read (``parquet.`path```) and each column's sources, but no
    subtype: the sources are UNSPECIFIED (DIRECT, no subtype), and that is said as a gap."""
    asked: list[Any] = []
    query = "SELECT upper(path) AS page, status, count(*) AS n FROM parquet.`/data/hits` GROUP BY 1, 2"
    found = connect_facts(_sql(query), ["page", "status", "n"], _hits_schema(asked))
    assert asked == [("parquet", "", {}, ("/data/hits",))]
    assert found.gaps == ["spark.sql text: its columns' sources are captured without their subtype"]
    plan = write_plan(found.facts)
    assert [(read.uris, read.format) for read in plan.reads] == [(("file:/data/hits",), "parquet")]
    unspecified = Transformation.UNSPECIFIED
    assert plan.columns == {
        "page": (ColumnSource(0, "path", unspecified),),
        "status": (ColumnSource(0, "status", unspecified),),
        "n": (),  # count(*): no column
    }
    facet = column_lineage_facet(
        plan, [NamedRead(DatasetRef("file", "/data/hits"), "file:/data/hits", False, plan.reads[0])]
    )
    [source] = facet["fields"]["page"]["inputFields"]
    assert source["transformations"] == [{"type": "DIRECT", "description": "", "masking": False}]


def test_spark_sql_text_over_a_view_names_what_it_could_not_resolve() -> None:
    """A temporary view's definition is the server's: its name is said, its columns get no sources,
    and a column selected from the SQL's output resolves to it, by name."""
    asked: list[Any] = []
    r = _relations()
    selected = r.Relation(
        project=r.Project(input=_sql("SELECT path FROM hits"), expressions=[_attribute("path")])
    )
    found = connect_facts(selected, ["path"], _hits_schema(asked))
    assert found.gaps == [
        "spark.sql text reads hits, a view or table the server resolves: its files and columns are not "
        "captured on Spark Connect",
        "spark.sql text: its columns' sources are captured without their subtype",
    ]
    plan = write_plan(found.facts)
    assert (plan.reads, plan.columns, asked) == ((), {"path": ()}, [])


def test_spark_sql_text_over_a_dataframe_resolves_it_through_its_reference() -> None:
    """``spark.sql("… FROM {hits}", hits=frame)`` as pyspark sends it: the text names an alias whose
    relation (the frame's plan) comes with it, so its files and columns are found."""
    r = _relations()
    alias = "_pyspark_connect_temp_view_1"
    reference = r.Relation(
        subquery_alias=r.SubqueryAlias(input=_read("parquet", ["/data/hits"]), alias=alias)
    )
    root = _sql(f"SELECT upper(path) AS page, status FROM {alias} WHERE bytes > 0")
    relation = r.Relation(with_relations=r.WithRelations(root=root, references=[reference]))
    found = connect_facts(relation, ["page", "status"], _hits_schema([]))
    assert found.gaps == ["spark.sql text: its columns' sources are captured without their subtype"]
    plan = write_plan(found.facts)
    assert [read.uris for read in plan.reads] == [("file:/data/hits",)]
    assert plan.columns == {
        "page": (ColumnSource(0, "path", Transformation.UNSPECIFIED),),
        "status": (ColumnSource(0, "status", Transformation.UNSPECIFIED),),
    }


def test_spark_sql_text_openlineage_sql_cannot_parse_is_a_gap() -> None:
    found = connect_facts(_sql("SELEC path FRM hits"), ["path"], _hits_schema([]))
    assert found.gaps == [
        "spark.sql text: openlineage-sql could not parse it (Expected: an SQL statement, found: SELEC "
        "at Line: 1, Column: 1)"
    ]
    assert write_plan(found.facts).columns == {"path": ()}


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
