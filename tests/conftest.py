"""Test databases: one SQLite template and one PostgreSQL database per test run, both migrated once.

``backend_url`` is parametrized over both databases, so every test that asks for it (or for
``lineage``) is part of the shared contract suite. Without a PostgreSQL server the PostgreSQL half
skips with its reason, unless ``LOTLINE_REQUIRE_PG=1`` (set by CI) turns that into a failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa

from lotline.services import Lineage
from lotline.storage.objects import Storage
from lotline.store.engine import Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
from support.databases import PG_ADMIN_URL, PgDatabases, fresh_url, store_of
from support.jvm_archive import ensure_archive, java_options, submit_args
from support.pg_cluster import ThrowawayPostgres, throwaway_postgres, unavailable_reason
from support.storage import new_s3_root, s3_options


def pytest_configure(config: pytest.Config) -> None:
    # Here, not in pyproject.toml: a change there reinstalls every venv (scripts/_venv.sh).
    config.addinivalue_line(
        "markers",
        "slow: heavy by nature and kept whole (a Spark cluster, the demo, JVM processes, the acceptance "
        "run); -m 'not slow' for a quick loop, CI runs them all",
    )
    # Every Spark JVM of the run starts from a class-data archive (support/jvm_archive.py), made once
    # by the first process (pytest-xdist's workers inherit the environment); one set by hand is kept.
    if "PYTEST_XDIST_WORKER" not in os.environ and "PYSPARK_SUBMIT_ARGS" not in os.environ:
        folder = config.cache.mkdir("spark-cds") if config.cache is not None else None
        archive = ensure_archive(Path(folder)) if folder is not None else None
        os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args(archive)
        os.environ["SPARK_DAEMON_JAVA_OPTS"] = java_options(archive)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: -p no:xdist runs without it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker more than the cores (``--numprocesses=auto``): part of the suite's time waits (on
    servers it started, browsers, ``lotline`` processes, the sleeps a test is about), which a third
    worker fills on two cores (DEVELOPERS.md "Tests" has the figures)."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with a ``slow`` test first, the rest after in their order: pytest-xdist hands out
    files in this order (``--dist=loadfile``), so the long ones start early and the short ones fill
    in at the end, instead of one worker finishing a long file while the other waits."""
    heavy = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in heavy)  # stable: each file's tests keep their order


def _pg_admin() -> sa.Engine:
    return sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")


def _unavailable(reason: str) -> None:
    if os.environ.get("LOTLINE_REQUIRE_PG") == "1":
        pytest.fail(f"LOTLINE_REQUIRE_PG=1 but PostgreSQL is unavailable: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable ({reason}); set LOTLINE_TEST_PG_URL to run these tests")


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[PgDatabases]:
    admin = _pg_admin()
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
    except sa.exc.OperationalError as error:
        admin.dispose()
        _unavailable(str(error.orig).strip().splitlines()[0])
    databases = PgDatabases(admin)
    yield databases
    databases.drop_all()


@pytest.fixture(scope="session")
def pg_store(pg_databases: PgDatabases) -> Iterator[Store]:
    """The run's migrated PostgreSQL database; tests empty it before use."""
    store = Store(pg_databases.create("main"))
    store.upgrade()
    yield store
    store.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "lotline.db"
    store = Store(f"sqlite:///{path}")
    store.upgrade()
    store.dispose()
    return path


@pytest.fixture
def new_database(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``new_database(backend)``: ``fresh_url`` for tests that need several databases in turn."""
    return lambda backend: fresh_url(request, backend)


@pytest.fixture
def own_postgres() -> Iterator[ThrowawayPostgres]:
    """A migrated PostgreSQL server of the test's own, to stop and start under lotline's processes
    (never the shared one); its binaries missing: a skip, or a failure under LOTLINE_REQUIRE_PG=1."""
    reason = unavailable_reason()
    if reason is not None:
        _unavailable(f"no throwaway PostgreSQL server: {reason}")
    with throwaway_postgres() as server:
        store = Store(server.url)
        store.upgrade()
        store.dispose()
        yield server


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend_url(request: pytest.FixtureRequest) -> str:
    """URL of an empty, migrated database of each kind, private to the test."""
    return fresh_url(request, request.param)


@pytest.fixture
def lineage(request: pytest.FixtureRequest, backend_url: str, tmp_path: Path) -> Iterator[Lineage]:
    """The use cases over a fresh database and a private local warehouse (``store_of``: on
    PostgreSQL the run's one store, whose closing at the end only closes its connections)."""
    service = Lineage.over(store_of(request, backend_url), Storage(str(tmp_path / "warehouse")))
    yield service
    service.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3-compatible server for the whole run: moto's server mode, a process of its own on
    127.0.0.1 (the storage tests talk to it over HTTP, as to S3)."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"moto's S3 server did not start on {endpoint}")
            time.sleep(0.1)
    try:
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    """An empty storage root of each kind: a local folder, and a bucket on the test S3 server."""
    if request.param == "local":
        return Storage(str(tmp_path / "warehouse"))
    endpoint: str = request.getfixturevalue("s3_endpoint")
    return Storage(new_s3_root(endpoint), s3_options(endpoint))


# One Spark session for the whole run: ``local[1]``, one shuffle partition, no UI, UTC, a small JVM
# (started on first use only: most of the suite never needs a JVM).
@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("lotline-tests")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        .getOrCreate()
    )
    yield session
    session.stop()


# One Spark Connect server (tests marked ``connect``), from pyspark's own distribution, started on
# first use and stopped after the module that used it (test_connect.py): a server left idle to the
# session's end kept a JVM busy beside every later test.
@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from support.connect_server import connect_server

    with connect_server(tmp_path_factory.mktemp("spark-connect")) as url:
        yield url
