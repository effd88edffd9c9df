"""Shared by the benchmarks: a fresh PostgreSQL database and a lotline server over it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import requests
import sqlalchemy as sa

from lotline.store.engine import Store

ADMIN_URL = os.environ.get("LOTLINE_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@contextmanager
def fresh_database(label: str) -> Iterator[str]:
    """A migrated PostgreSQL database that is dropped afterwards."""
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"lotline_bench_{label}_{uuid.uuid4().hex[:6]}"
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = sa.make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    store = Store(url)
    store.upgrade()
    store.dispose()
    try:
        yield url
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def free_port() -> int:
    """A port nothing listens on now: benchmarks of other engineers on this machine may hold a
    fixed one, and a request to their server would measure it instead."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def kept_database(name: str) -> str:
    """The PostgreSQL database ``name``, created if absent and migrated, and never dropped: seeding
    five years takes minutes on a shared machine, so the benchmarks may seed once and reuse it."""
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        exists = connection.execute(
            sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
        ).first()
        if exists is None:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    url = sa.make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    store = Store(url)
    store.upgrade()
    store.dispose()
    return url


@contextmanager
def serve(db_url: str, port: int, workers: int = 1) -> Iterator[tuple[str, int]]:
    """``lotline serve`` in its own process(es), as deployed: its URL and process id."""
    env = {**os.environ, "LOTLINE_DB_URL": db_url}
    env.pop("LOTLINE_API_TOKEN", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "lotline.cli.main", "serve", "--port", str(port), "--workers", str(workers)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if requests.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:  # not up yet, or too busy to answer within the second
                time.sleep(0.1)
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)
