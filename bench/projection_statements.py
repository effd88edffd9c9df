"""Statements per projected event: the bench events of ``bench/projection`` journaled, then drained
with a SQLAlchemy ``before_cursor_execute`` listener counting what the drain sends. Unlike a rate,
the count does not depend on the machine's load, so it is the figure to compare between commits.

Run: ``.venv/bin/python -m bench.projection_statements [--events N] [--backends postgresql,sqlite]
[--top K]`` (``--top``: also the K most frequent statements, by their first words).
"""

from __future__ import annotations

import argparse
import collections
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from bench._server import fresh_database
from bench.projection import _bodies, _journal
from lotline.services import Lineage
from lotline.store.engine import Store


@contextmanager
def counting(engine: sa.Engine) -> Iterator[collections.Counter[str]]:
    """The statements ``engine`` sends meanwhile, counted by their text (whitespace squeezed)."""
    counted: collections.Counter[str] = collections.Counter()

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        counted[re.sub(r"\s+", " ", statement).strip()] += 1

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        yield counted
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


def statements_per_event(db_url: str, count: int) -> tuple[int, collections.Counter[str]]:
    """How many events ``drain()`` applied, and the statements it sent."""
    with Lineage.over(Store(db_url)) as lineage:
        bodies = _bodies(count, 0)
        _journal(lineage, bodies)
        with counting(lineage.store.engine) as counted:
            drained = lineage.projection.drain()
        assert not drained.failed and len(drained.applied) == len(bodies), drained.failed[:3]
        return len(bodies), counted


def report(backend: str, count: int, top: int) -> None:
    if backend == "postgresql":
        with fresh_database("statements") as db_url:
            applied, counted = statements_per_event(db_url, count)
    else:
        with tempfile.TemporaryDirectory() as directory:
            db_url = f"sqlite:///{directory}/lotline.db"
            Store(db_url).upgrade()
            applied, counted = statements_per_event(db_url, count)
    total = sum(counted.values())
    print(f"{backend}: {total:,} statements for {applied:,} events: {total / applied:.2f} per event")
    for statement, times in counted.most_common(top):
        print(f"  {times / applied:6.3f}/event  {statement[:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events to project per backend")
    parser.add_argument("--backends", default="postgresql,sqlite")
    parser.add_argument("--top", type=int, default=0, help="also the most frequent statements")
    options = parser.parse_args()
    for backend in filter(None, options.backends.split(",")):
        report(backend, options.events, options.top)


if __name__ == "__main__":
    main()
