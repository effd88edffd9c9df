"""``store/sql/<backend>/*.sql`` hold the current text of every SQL function and trigger: a migrated
database has exactly the functions and triggers those files make — dropped and made again from the
files (in a transaction rolled back), every definition reads the same, and none is missing or more."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Connection

from lotline.store import sql
from lotline.store.engine import Store
from support.databases import fresh_url

Definitions = dict[str, str]


def _postgresql(connection: Connection) -> Definitions:
    functions = connection.exec_driver_sql(
        "SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid) FROM pg_proc p "
        "WHERE p.pronamespace = current_schema()::regnamespace AND p.prokind = 'f'"
    )
    triggers = connection.exec_driver_sql(
        "SELECT t.tgname, pg_get_triggerdef(t.oid) || ' ENABLED ' || t.tgenabled::text FROM pg_trigger t "
        "JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal"
    )
    return {f"function {name}": text for name, text in functions} | {
        f"trigger {name}": text for name, text in triggers
    }


def _sqlite(connection: Connection) -> Definitions:
    rows = connection.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
    return {f"trigger {name}": re.sub(r"\s+", " ", text) for name, text in rows}


def _drop_all(connection: Connection, found: Definitions) -> None:
    postgres = connection.dialect.name == "postgresql"
    for key in found:
        kind, name = key.split(" ", 1)
        if kind == "function":
            connection.exec_driver_sql(f"DROP FUNCTION {name} CASCADE")  # its triggers with it
        elif not postgres:
            connection.exec_driver_sql(f"DROP TRIGGER {name}")


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_the_sql_files_make_exactly_the_migrated_functions_and_triggers(
    request: pytest.FixtureRequest, backend: str
) -> None:
    store = Store(fresh_url(request, backend))
    read = _postgresql if backend == "postgresql" else _sqlite
    try:
        with store.rehearsal() as connection:
            migrated = read(connection)
            assert migrated  # the counts' triggers at least
            _drop_all(connection, migrated)
            assert read(connection) == {}
            for statement in sql.statements(backend):
                connection.exec_driver_sql(statement)
            assert read(connection) == migrated
    finally:
        store.dispose()


def test_statements_end_at_a_semicolon_outside_dollar_quoted_bodies() -> None:
    text = (
        "CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\n  PERFORM 1;\nEND $$;\n"
        "ALTER TABLE t ENABLE ALWAYS TRIGGER x;\n"
    )
    assert sql.split(text) == [
        "CREATE FUNCTION f() RETURNS void AS $$\nBEGIN\n  PERFORM 1;\nEND $$",
        "ALTER TABLE t ENABLE ALWAYS TRIGGER x",
    ]
    with pytest.raises(ValueError, match="without ';'"):
        sql.split("SELECT 1")
