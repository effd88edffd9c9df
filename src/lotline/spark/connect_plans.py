"""What a write read and where each written column comes from, on a Spark Connect client.

Classic mode asks the driver's JVM for the analyzed plan (``WriteFacts.java``); over Spark Connect
the driver is the server's, so the plan is read where it starts: the protobuf ``Relation`` the
client sends (``DataFrame._plan``). Its names are unresolved, so this module resolves them as
Spark's analyzer would — each column reference by name (or by its DataFrame's plan id) against its
child's output — and gives every column an id, producing the same facts ``WriteFacts.java`` gives
(kind, output, expressions with ``named`` / ``how`` / ``references``, children). ``spark.plans``
then applies its one set of rules to either. The schema of a file read comes from the relation when
it declares one, else from the server (``schema_of``: one call per distinct read, cached by the
caller).

What the walk cannot resolve — a relation type it does not know, ``spark.sql`` text, a name not
found — is listed in ``ConnectPlan.gaps`` and those columns get no sources: never a guess.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Spark's aggregate functions (and the window functions over them), as Connect names them.
AGGREGATES = frozenset(
    {
        "count",
        "count_if",
        "count_min_sketch",
        "sum",
        "sum_distinct",
        "avg",
        "mean",
        "min",
        "max",
        "first",
        "first_value",
        "last",
        "last_value",
        "collect_list",
        "collect_set",
        "array_agg",
        "approx_count_distinct",
        "approx_percentile",
        "percentile",
        "percentile_approx",
        "median",
        "mode",
        "stddev",
        "stddev_samp",
        "stddev_pop",
        "std",
        "variance",
        "var_samp",
        "var_pop",
        "skewness",
        "kurtosis",
        "corr",
        "covar_pop",
        "covar_samp",
        "any_value",
        "bool_and",
        "bool_or",
        "every",
        "some",
        "any",
        "bit_and",
        "bit_or",
        "bit_xor",
        "max_by",
        "min_by",
        "product",
        "histogram_numeric",
        "regr_avgx",
        "regr_avgy",
        "regr_count",
        "regr_intercept",
        "regr_r2",
        "regr_slope",
        "regr_sxx",
        "regr_sxy",
        "regr_syy",
        "try_avg",
        "try_sum",
        "listagg",
        "string_agg",
        "hll_sketch_agg",
        "hll_union_agg",
        "grouping",
        "grouping_id",
    }
)
#: Relations whose output is their input's (row filters, order, partitioning, observations).
_PASS_THROUGH = {
    "filter": "Filter",
    "sort": "Sort",
    "limit": "GlobalLimit",
    "offset": "Offset",
    "tail": "Tail",
    "sample": "Sample",
    "deduplicate": "Deduplicate",
    "repartition": "Repartition",
    "repartition_by_expression": "RepartitionByExpression",
    "hint": "ResolvedHint",
    "collect_metrics": "CollectMetrics",
    "with_watermark": "EventTimeWatermark",
    "subquery_alias": "SubqueryAlias",
    "drop_na": "Filter",
    "fill_na": "Project",
    "replace": "Project",
}
#: ``format.`path``` in spark.sql text: a file read (Spark's "SQL on files").
SQL_FILE_FORMATS = frozenset({"parquet", "csv", "json", "text", "orc", "avro"})
#: Leaves that are not files: no dataset, as in classic mode (``spark.plans``).
_NOT_FILES = {"local_relation", "cached_local_relation", "range", "cached_remote_relation"}
_TEXT_FIELDS = (("value", "string"),)
_IDENTIFIER = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Column:
    """A column a relation outputs: its name and id (an attribute's ``exprId``)."""

    name: str
    id: int


class _Scope(list[Column]):
    """A relation's columns; ``open``: not known (a relation not understood, a local relation),
    so any name resolves, to a column without sources."""

    open = False


@dataclass
class ConnectPlan:
    """The facts of the written query, as ``WriteFacts.java`` gives them, and what was not captured."""

    facts: dict[str, Any]
    gaps: list[str] = field(default_factory=list)


#: (format, schema given or "", options, paths) -> the read's columns as (name, simple type).
SchemaOf = Callable[[str, str, Mapping[str, str], tuple[str, ...]], tuple[tuple[str, str], ...]]


def connect_facts(relation: Any, written: Sequence[str], schema_of: SchemaOf) -> ConnectPlan:
    """The facts of ``relation`` (a Connect ``Relation`` protobuf), its output named as the written
    schema names it (``written``: Spark's names, positionally; a column the walk could not name)."""
    walk = _Walk(schema_of)
    root = walk.node(relation)
    output = root["output"]
    if root.get("by_name"):  # spark.sql text written as it is: its columns are known by name
        known = {column[0].lower(): column[1] for column in output}
        root["output"] = []
        for name in written:
            if name.lower() not in known:  # a column without sources (count(*), a literal)
                known[name.lower()] = walk.fresh_id()
                root["expressions"].append({"named": known[name.lower()], "how": "", "references": []})
            root["output"].append([name, known[name.lower()]])
    elif len(output) == len(written):
        root["output"] = [
            [name, column[1], *column[2:]] for name, column in zip(written, output, strict=True)
        ]
    else:
        walk.gaps.append(f"the written columns ({len(written)}) and the plan's ({len(output)}) differ")
        root["output"] = []
    return ConnectPlan(root, list(dict.fromkeys(walk.gaps)))  # each said once


class _Walk:
    def __init__(self, schema_of: SchemaOf) -> None:
        self._ids = itertools.count(1)
        self._schema_of = schema_of
        self.gaps: list[str] = []
        #: A DataFrame's plan id -> its relation's output (``df["x"]`` names its DataFrame).
        self._by_plan: dict[int, list[Column]] = {}

    def node(self, relation: Any) -> dict[str, Any]:
        kind = relation.WhichOneof("rel_type")
        body = getattr(relation, kind) if kind else None
        built = self._node(kind or "", body)
        if relation.HasField("common") and relation.common.HasField("plan_id"):
            self._by_plan[relation.common.plan_id] = _columns(built)
        return built

    def _node(self, kind: str, body: Any) -> dict[str, Any]:
        if kind == "read":
            return self._read(body)
        if kind in _NOT_FILES:
            return self._leaf(kind, body)
        if kind in _PASS_THROUGH:
            child = self.node(body.input)
            return {
                **_plain(_PASS_THROUGH[kind], child["output"], [child]),
                "opaque": child.get("opaque", False),
            }
        if kind == "project":
            return self._project(body)
        if kind == "with_columns":
            return self._with_columns(body)
        if kind == "aggregate":
            return self._aggregate(body)
        if kind == "join":
            return self._join(body)
        if kind == "set_op":
            return self._set_op(body)
        if kind == "to_df":
            names = list(body.column_names)
            return self._renamed(body.input, lambda at, _: names[at] if at < len(names) else None)
        if kind == "with_columns_renamed":
            renames = dict(body.rename_columns_map) or {r.col_name: r.new_col_name for r in body.renames}
            lowered = {old.lower(): new for old, new in renames.items()}
            return self._renamed(body.input, lambda _, name: lowered.get(name.lower()))
        if kind == "drop":
            return self._drop(body)
        if kind in ("sql", "with_relations"):
            return self._sql_relation(kind, body)
        return self._unknown(kind, body)

    # -- leaves --------------------------------------------------------------------------------
    def _read(self, read: Any) -> dict[str, Any]:
        if read.WhichOneof("read_type") != "data_source":
            name = read.named_table.unparsed_identifier
            self.gaps.append(f"table {name}: a catalog table's files are not resolved on Spark Connect")
            return self._fresh("named_table", ())
        source = read.data_source
        paths = tuple(source.paths)
        if not paths:
            self.gaps.append(f"a {source.format} read without paths (a table or a connector)")
            return self._fresh("data_source", ())
        options = dict(source.options)
        schema = source.schema if source.HasField("schema") else ""
        return self._files(source.format or "parquet", schema, options, paths)

    def _files(
        self, format: str, schema: str, options: Mapping[str, str], paths: tuple[str, ...]
    ) -> dict[str, Any]:
        fields = self._schema_of(format, schema, options, paths)
        columns = [[name, next(self._ids), type_] for name, type_ in fields]
        return {
            "kind": "LogicalRelation",
            "format": format,
            "paths": [_qualified(p) for p in paths],
            "output": columns,
        }

    def _sql_relation(self, kind: str, body: Any) -> dict[str, Any]:
        """``spark.sql`` text alone, or with the DataFrames it names (``with_relations``: pyspark's
        ``spark.sql("… FROM {hits}", hits=frame)``; the text names each by the alias of a
        reference, whose plan is here, so its columns resolve as any other relation's)."""
        if kind == "sql":
            return self._sql(body.query, {}, [])
        if body.root.WhichOneof("rel_type") != "sql":
            return self._unknown(kind, body)
        views, children = {}, []
        for reference in body.references:
            node = self.node(reference)
            children.append(node)
            if reference.WhichOneof("rel_type") == "subquery_alias":
                views[reference.subquery_alias.alias] = {c[0].lower(): c[1] for c in node["output"]}
        return self._sql(body.root.sql.query, views, children)

    def _sql(
        self, query: str, views: dict[str, dict[str, int]], children: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """``spark.sql`` text, parsed by openlineage-sql: the files it reads by path
        (``parquet.`/data/hits```), the DataFrames it reads (``views``: alias -> columns by lower-case
        name) and the source columns of each output column it names. It gives no transformation
        subtype (``Transformation.UNSPECIFIED``), and a view or catalog table of the server's is
        not resolved: both named as gaps. Its output columns are known by name only, so any other
        name resolves, to a column without sources."""
        opaque = {**_plain("SQL", [], children), "opaque": True, "by_name": True}
        try:
            from openlineage_sql import parse
        except ImportError:
            self.gaps.append(
                "spark.sql text: not parsed, openlineage-sql is not installed (lotline[connect])"
            )
            return opaque
        parsed = parse([query], dialect="spark")
        if parsed is None or parsed.errors:
            why = "; ".join(e.message for e in parsed.errors) if parsed else "nothing found"
            self.gaps.append(f"spark.sql text: openlineage-sql could not parse it ({why[:200]})")
            return opaque
        tables, children = dict(views), list(children)
        for table in parsed.in_tables:
            if table.name in views:
                continue
            if (table.schema or "").lower() in SQL_FILE_FORMATS and "/" in table.name:
                read = self._files(table.schema.lower(), "", {}, (table.name,))
                children.append(read)
                tables[table.name] = {c[0].lower(): c[1] for c in read["output"]}
            else:
                self.gaps.append(
                    f"spark.sql text reads {table.qualified_name}, a view or table the server resolves: "
                    "its files and columns are not captured on Spark Connect"
                )
        output, expressions = [], []
        for lineage in parsed.column_lineage:
            column = self.fresh_id()
            references = [
                tables[source.origin.name][source.name.lower()]
                for source in lineage.lineage
                if source.origin and source.name.lower() in tables.get(source.origin.name, {})
            ]
            output.append([lineage.descendant.name, column])
            expressions.append({"named": column, "how": "", "references": references})
        if expressions:
            self.gaps.append("spark.sql text: its columns' sources are captured without their subtype")
        return {**_plain("SQL", output, children, expressions), "opaque": True, "by_name": True}

    def _leaf(self, kind: str, body: Any) -> dict[str, Any]:
        names: tuple[str, ...] = ()
        if kind == "range":
            names = ("id",)
        return self._fresh(kind, names)

    def _fresh(self, kind: str, names: Iterable[str]) -> dict[str, Any]:
        """A leaf that is not files (``spark.plans`` skips a relation without a format): its columns
        have no sources; with no names known, any name resolves."""
        output = [[name, next(self._ids), ""] for name in names]
        return {"kind": "LogicalRelation", "relation": kind, "output": output, "opaque": not output}

    def _unknown(self, kind: str, body: Any) -> dict[str, Any]:
        """A relation not understood: the reads below it are still found, its columns get no sources."""
        self.gaps.append(f"relation {kind or 'unknown'}: its column lineage is not captured on Spark Connect")
        children = [self.node(child) for child in _child_relations(body)]
        return {"kind": kind, "output": [], "expressions": [], "children": children, "opaque": True}

    # -- nodes that make columns ---------------------------------------------------------------
    def _project(self, project: Any) -> dict[str, Any]:
        child = self.node(project.input) if project.HasField("input") else _plain("OneRowRelation", [], [])
        scope = _columns(child)
        output, expressions = [], []
        for expression in project.expressions:
            for column, described in self._named(expression, scope):
                output.append(column)
                expressions.append(described)
        return _plain("Project", output, [child], expressions)

    def _with_columns(self, with_columns: Any) -> dict[str, Any]:
        child = self.node(with_columns.input)
        scope = _columns(child)
        output = [list(c) for c in child["output"]]
        expressions = [{"named": c[1], "how": "IDENTITY", "references": [c[1]]} for c in output]
        for alias in with_columns.aliases:
            name = alias.name[0]
            column = self.fresh_id()
            expressions.append(self._describe(alias.expr, scope, column))
            at = [i for i, c in enumerate(output) if c[0].lower() == name.lower()]
            if at:
                output[at[0]] = [name, column]
            else:
                output.append([name, column])
        return _plain("Project", output, [child], expressions)

    def _aggregate(self, aggregate: Any) -> dict[str, Any]:
        child = self.node(aggregate.input)
        scope = _columns(child)
        if aggregate.HasField("pivot"):
            self.gaps.append("a pivot's columns are not captured on Spark Connect")
            return {**_plain("Aggregate", [], [child]), "opaque": True}
        output, expressions = [], []
        for expression in [*aggregate.grouping_expressions, *aggregate.aggregate_expressions]:
            for column, described in self._named(expression, scope):
                output.append(column)
                expressions.append(described)
        return _plain("Aggregate", output, [child], expressions)

    def _join(self, join: Any) -> dict[str, Any]:
        left, right = self.node(join.left), self.node(join.right)
        kind = join.join_type
        # JOIN_TYPE_LEFT_SEMI = 5, JOIN_TYPE_LEFT_ANTI = 4: only the left side's columns.
        if kind in (4, 5):
            return _plain("Join", left["output"], [left, right])
        using = [u.lower() for u in join.using_columns]
        if not using:
            return _plain("Join", [*left["output"], *right["output"]], [left, right])
        left_keys = {c[0].lower(): c for c in left["output"] if c[0].lower() in using}
        right_keys = {c[0].lower(): c for c in right["output"] if c[0].lower() in using}
        keys, expressions = [], []
        for name in using:
            if name not in left_keys or name not in right_keys:
                self.gaps.append(f"join column {name} is not in both sides")
                continue
            if kind == 2:  # full outer: coalesce(left, right)
                column = self.fresh_id()
                keys.append([left_keys[name][0], column])
                expressions.append(
                    {
                        "named": column,
                        "how": "TRANSFORMATION",
                        "references": [left_keys[name][1], right_keys[name][1]],
                    }
                )
            else:  # inner and left: the left key; right: the right one
                keys.append(list(right_keys[name] if kind == 3 else left_keys[name])[:2])
        rest = [c for c in left["output"] if c[0].lower() not in using]
        rest += [c for c in right["output"] if c[0].lower() not in using]
        return _plain("Project", [*keys, *rest], [_plain("Join", [], [left, right])], expressions)

    def _set_op(self, set_op: Any) -> dict[str, Any]:
        left, right = self.node(set_op.left_input), self.node(set_op.right_input)
        # SET_OP_TYPE_UNION = 2; intersect and except keep only the left side's rows.
        if set_op.set_op_type != 2:
            return _plain("Intersect", left["output"], [left, right])
        if set_op.by_name:
            by_name = {c[0].lower(): c for c in right["output"]}
            right = {**right, "output": [by_name.get(c[0].lower(), c) for c in left["output"]]}
        return _plain("Union", [list(c)[:2] for c in left["output"]], [left, right])

    def _renamed(self, input: Any, renamed: Callable[[int, str], str | None]) -> dict[str, Any]:
        """``toDF`` (renames by position) and ``withColumnsRenamed`` (by name): IDENTITY aliases."""
        child = self.node(input)
        output: list[list[Any]] = []
        expressions: list[dict[str, Any]] = []
        for position, (name, column, *_) in enumerate(child["output"]):
            new = renamed(position, name)
            if new is None:
                output.append([name, column])
                expressions.append({"named": column, "how": "IDENTITY", "references": [column]})
                continue
            fresh = self.fresh_id()
            output.append([new, fresh])
            expressions.append({"named": fresh, "how": "IDENTITY", "references": [column]})
        return _plain("Project", output, [child], expressions)

    def _drop(self, drop: Any) -> dict[str, Any]:
        child = self.node(drop.input)
        scope = _columns(child)
        gone = {name.lower() for name in drop.column_names}
        for expression in drop.columns:
            gone |= {c.name.lower() for c in scope if c.id in self._references(expression, scope)}
        output = [c for c in child["output"] if c[0].lower() not in gone]
        return _plain("Project", [list(c)[:2] for c in output], [child])

    # -- expressions ---------------------------------------------------------------------------
    def fresh_id(self) -> int:
        return next(self._ids)

    def _named(self, expression: Any, scope: list[Column]) -> list[tuple[list[Any], dict[str, Any]]]:
        """The output column(s) of one projected expression and how each derives."""
        kind = expression.WhichOneof("expr_type")
        if kind == "unresolved_star":
            return [([c.name, c.id], _identity(c.id)) for c in self._star(expression.unresolved_star, scope)]
        if kind == "unresolved_attribute":
            found = self._resolve(expression.unresolved_attribute, scope)
            if found is not None:
                return [([found.name, found.id], _identity(found.id))]
        name = _name_of(expression)
        column = self.fresh_id()
        return [([name, column], self._describe(expression, scope, column))]

    def _describe(self, expression: Any, scope: list[Column], column: int) -> dict[str, Any]:
        inner = expression.alias.expr if expression.WhichOneof("expr_type") == "alias" else expression
        references = self._references(inner, scope)
        if inner.WhichOneof("expr_type") == "unresolved_attribute" and len(references) == 1:
            how = "IDENTITY"
        elif _aggregates(inner):
            how = "AGGREGATION"
        else:
            how = "TRANSFORMATION"
        return {"named": column, "how": how, "references": sorted(references)}

    def _references(self, expression: Any, scope: list[Column], counted: bool = False) -> set[int]:
        """The ids of the columns ``expression`` refers to (``count(*)`` refers to none, as in Spark)."""
        kind = _kind(expression)
        if kind == "unresolved_attribute":
            column = self._resolve(expression.unresolved_attribute, scope)
            return set() if column is None else {column.id}
        if kind == "unresolved_star":
            return set() if counted else {c.id for c in self._star(expression.unresolved_star, scope)}
        if kind == "expression_string":
            return self._in_text(expression.expression_string.expression, scope)
        if kind == "unresolved_regex":
            self.gaps.append(f"column regex {expression.unresolved_regex.col_name} is not resolved")
            return set()
        found: set[int] = set()
        if kind == "unresolved_function":
            counted = expression.unresolved_function.function_name.lower() == "count"
        for described, value in expression.ListFields():
            if described.message_type is not None:
                for item in _messages(value):
                    found |= self._references(item, scope, counted)
        return found

    def _in_text(self, text: str, scope: list[Column]) -> set[int]:
        """The columns an ``F.expr`` text names: each identifier that is a column of the input and
        not called as a function."""
        by_name = {c.name.lower(): c.id for c in scope}
        found = set()
        for match in _IDENTIFIER.finditer(text):
            word = (match.group(1) or "").replace("``", "`") or match.group(2)
            if text[match.end() :].lstrip().startswith("(") and match.group(2):
                continue
            if word.lower() in by_name:
                found.add(by_name[word.lower()])
        return found

    def _resolve(self, attribute: Any, scope: list[Column]) -> Column | None:
        candidates = scope
        if attribute.HasField("plan_id") and attribute.plan_id in self._by_plan:
            candidates = self._by_plan[attribute.plan_id]
        parts = _parts(attribute.unparsed_identifier)
        for name in (parts[0], parts[-1]) if len(parts) > 1 else (parts[0],):
            matches = [c for c in candidates if c.name.lower() == name.lower()]
            if matches:
                return matches[0]
        if getattr(candidates, "open", False):
            return Column(parts[-1], self.fresh_id())
        self.gaps.append(f"column {attribute.unparsed_identifier} is not resolved")
        return None

    def _star(self, star: Any, scope: list[Column]) -> list[Column]:
        if star.HasField("plan_id") and star.plan_id in self._by_plan:
            return self._by_plan[star.plan_id]
        return scope


def _plain(
    kind: str,
    output: list[Any],
    children: list[dict[str, Any]],
    expressions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "output": [list(c)[:2] for c in output],
        "expressions": expressions or [],
        "children": children,
    }


def _identity(column: int) -> dict[str, Any]:
    return {"named": column, "how": "IDENTITY", "references": [column]}


def _columns(node: Mapping[str, Any]) -> _Scope:
    scope = _Scope(Column(c[0], c[1]) for c in node["output"])
    scope.open = bool(node.get("opaque"))
    return scope


def _name_of(expression: Any) -> str:
    """An expression's column name when it says (an alias); Spark's generated names are taken from
    the written schema instead (``connect_facts``)."""
    if expression.WhichOneof("expr_type") == "alias":
        return str(expression.alias.name[0])
    return ""


def _kind(message: Any) -> str | None:
    """An ``Expression``'s kind; None for the other messages inside one (a cast's type, …)."""
    return message.WhichOneof("expr_type") if message.DESCRIPTOR.name == "Expression" else None


def _aggregates(expression: Any) -> bool:
    kind = _kind(expression)
    if kind == "unresolved_function" and expression.unresolved_function.function_name.lower() in AGGREGATES:
        return True
    if kind == "call_function" and expression.call_function.function_name.lower() in AGGREGATES:
        return True
    for described, value in expression.ListFields():
        if described.message_type is not None and any(_aggregates(item) for item in _messages(value)):
            return True
    return False


def _messages(value: Any) -> list[Any]:
    """A message field's value as a list of messages (one, or a repeated field's)."""
    return (
        [value] if hasattr(value, "ListFields") else [item for item in value if hasattr(item, "ListFields")]
    )


def _child_relations(body: Any) -> list[Any]:
    """The ``Relation`` fields of a relation not understood (its inputs)."""
    found: list[Any] = []
    if body is None:
        return found
    for described, value in body.ListFields():
        if described.message_type is not None and described.message_type.name == "Relation":
            found.extend(_messages(value))
    return found


def _parts(identifier: str) -> list[str]:
    """``a.b``, ```a.b```, ```x``.y`` as Spark splits a column name."""
    parts, current, quoted, i = [], "", False, 0
    while i < len(identifier):
        char = identifier[i]
        if char == "`":
            if quoted and identifier[i + 1 : i + 2] == "`":
                current += "`"
                i += 2
                continue
            quoted = not quoted
        elif char == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
        i += 1
    parts.append(current)
    return parts


def _qualified(path: str) -> str:
    """A path as Spark's file index names it: ``/x`` and ``file:///x`` are ``file:/x``."""
    if path.startswith("file:///"):
        return "file:/" + path[len("file:///") :]
    if path.startswith("/"):
        return "file:" + path
    return path


def text_fields() -> tuple[tuple[str, str], ...]:
    """The one column of Spark's text source."""
    return _TEXT_FIELDS
