"""A process whose transaction is made a deadlock's victim on purpose (``tests/contract/test_transact.py``).

It runs :meth:`Store.transact` over two rows of ``namespaces``: it updates the first, says so
(``out/first``), waits for the test's own transaction to hold the second (``out/second``), then
updates the second. With a short ``deadlock_timeout`` it is the one PostgreSQL ends; its tries are
counted in ``out/tries``.
"""

from __future__ import annotations

import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import Connection

from lotline.store.engine import Store
from lotline.store.schema import namespaces

WAIT_S = 60


def cross(url: str, first: str, second: str, out: str) -> None:
    folder = Path(out)
    store = Store(url)
    tries = 0

    def work(connection: Connection) -> None:
        nonlocal tries
        tries += 1
        (folder / "tries").write_text(str(tries))
        connection.exec_driver_sql("SET LOCAL deadlock_timeout = '50ms'")
        _describe(connection, first, f"process, try {tries}")
        (folder / "first").touch()
        deadline = time.monotonic() + WAIT_S
        while not (folder / "second").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        _describe(connection, second, f"process, try {tries}")

    try:
        store.transact(work)
    finally:
        store.dispose()


def _describe(connection: Connection, name: str, text: str) -> None:
    connection.execute(sa.update(namespaces).where(namespaces.c.name == name).values(description=text))
