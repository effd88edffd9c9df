"""SQLite writers queue on a turn file beside the database (``store/drivers._writers_turn``), in
separate processes as workers are: a write holds the turn, a waiting writer goes on once it is
free, a killed writer lets go of it, and a write opened inside another one fails as SQLite makes it
fail instead of waiting for itself."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from lotline.store import drivers
from lotline.store.engine import Store

JOIN_TIMEOUT_S = 120
spawn = multiprocessing.get_context("spawn")


def _hold_a_write(url: str, holding: str, release: str) -> None:
    """Write a row, then keep the transaction open until ``release`` exists."""
    store = Store(url)
    with store.write() as connection:
        connection.execute(sa.text("INSERT INTO scratch (who) VALUES ('holder')"))
        Path(holding).touch()
        while not Path(release).exists():
            time.sleep(0.02)


def _write_once(url: str, done: str) -> None:
    store = Store(url)
    with store.write() as connection:
        connection.execute(sa.text("INSERT INTO scratch (who) VALUES ('waiter')"))
    Path(done).touch()


def _nest_writes(url: str, outcome: str) -> None:
    drivers.SQLITE_BUSY_TIMEOUT_S = 1
    outer, inner = Store(url), Store(url)
    try:
        with outer.write(), inner.write() as connection:
            connection.execute(sa.text("INSERT INTO scratch (who) VALUES ('nested')"))
    except Exception as error:  # the test reads which error it was
        Path(outcome).write_text(type(error).__name__)
    else:
        Path(outcome).write_text("no error")


@pytest.fixture
def database(tmp_path: Path, sqlite_template: Path) -> tuple[str, Path]:
    path = tmp_path / "lotline.db"
    shutil.copyfile(sqlite_template, path)
    store = Store(f"sqlite:///{path}")
    with store.write() as connection:
        connection.execute(sa.text("CREATE TABLE scratch (who TEXT NOT NULL)"))
    store.dispose()
    return f"sqlite:///{path}", Path(f"{path}-writers")


def _turn_is_taken(turn: Path) -> bool:
    descriptor = os.open(turn, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def _wait_for(path: Path, process: multiprocessing.process.BaseProcess) -> None:
    while not path.exists():
        assert process.is_alive(), f"{process.name} ended early ({process.exitcode})"
        time.sleep(0.02)


def _rows(url: str) -> list[str]:
    store = Store(url)
    try:
        with store.read() as connection:
            return sorted(connection.execute(sa.text("SELECT who FROM scratch")).scalars())
    finally:
        store.dispose()


def test_a_waiting_writer_writes_once_the_holder_lets_go(database: tuple[str, Path], tmp_path: Path) -> None:
    url, turn = database
    holding, release, done = tmp_path / "holding", tmp_path / "release", tmp_path / "done"
    holder = spawn.Process(target=_hold_a_write, args=(url, str(holding), str(release)))
    holder.start()
    _wait_for(holding, holder)
    assert _turn_is_taken(turn)
    waiter = spawn.Process(target=_write_once, args=(url, str(done)))
    waiter.start()
    assert _rows(url) == []  # readers do not queue: they see what is committed
    assert not done.exists()
    release.touch()
    for process in (holder, waiter):
        process.join(JOIN_TIMEOUT_S)
        assert process.exitcode == 0
    assert _rows(url) == ["holder", "waiter"]
    assert not _turn_is_taken(turn)


def test_a_killed_writer_lets_go_of_the_turn(database: tuple[str, Path], tmp_path: Path) -> None:
    url, turn = database
    holding = tmp_path / "holding"
    holder = spawn.Process(target=_hold_a_write, args=(url, str(holding), str(tmp_path / "never")))
    holder.start()
    _wait_for(holding, holder)
    assert holder.pid is not None
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(JOIN_TIMEOUT_S)
    assert not _turn_is_taken(turn)
    done = tmp_path / "done"
    waiter = spawn.Process(target=_write_once, args=(url, str(done)))
    waiter.start()
    waiter.join(JOIN_TIMEOUT_S)
    assert waiter.exitcode == 0
    assert _rows(url) == ["waiter"]  # the killed transaction was rolled back


def test_a_write_inside_a_write_fails_instead_of_waiting_for_itself(
    database: tuple[str, Path], tmp_path: Path
) -> None:
    url, _turn = database
    outcome = tmp_path / "outcome"
    nester = spawn.Process(target=_nest_writes, args=(url, str(outcome)))
    nester.start()
    nester.join(JOIN_TIMEOUT_S)
    if nester.is_alive():
        nester.kill()
        pytest.fail("a write inside a write waited for itself")
    assert outcome.read_text() == "DatabaseUnavailable"
    assert _rows(url) == []
