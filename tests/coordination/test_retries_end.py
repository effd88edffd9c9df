"""Retries that end (issue 39.6), on SQLite and PostgreSQL: a lot that fails ``max_attempts`` times
in a row on unchanged inputs and job version is given up on — no worker, no ``lotline run``
(``retry_now``), no re-registration of the same job version takes it — until an input lot gets a
new version, the job version changes, or an operator retries it (``LotService.retry``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from lotline.domain.clock import ManualClock
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import InvalidInput
from lotline.services import Lineage
from lotline.services.config import load_settings
from support.lots import LotWorld

LOT = "20230101PT5M050"


def _world(lineage: Lineage, clock: ManualClock | None = None, max_attempts: int = 3) -> LotWorld:
    if clock is None:
        world = LotWorld(Lineage.over(lineage.store, lineage.storage, max_attempts=max_attempts))
    else:
        world = LotWorld(Lineage.over(lineage.store, lineage.storage, clock=clock, max_attempts=max_attempts))
    world.job("ingest", output="raw")
    world.job("parse", output="hits", inputs=["raw"])
    world.produce("ingest", LOT)
    return world


def _next(world: LotWorld, worker: str = "worker-1") -> LotClaim | None:
    return world.lots.claim(worker, world.ns, "parse")


def _fail_until_given_up(world: LotWorld, clock: ManualClock, attempts: int = 3) -> None:
    for attempt in range(1, attempts + 1):
        claim = _next(world)
        assert claim is not None and (claim.lot, claim.attempt) == (LOT, attempt)
        world.lots.fail(claim, error="[MALFORMED_RECORD_IN_PARSING] bad.csv")
        clock.advance(timedelta(minutes=10))  # any back-off has run out


def test_a_lot_is_given_up_after_three_failures_in_a_row(lineage: Lineage, clock: ManualClock) -> None:
    world = _world(lineage, clock)
    _fail_until_given_up(world, clock)
    assert world.lots.given_up(world.ns, "parse") == {LOT: 3}
    clock.advance(timedelta(days=30))
    assert _next(world) is None and _next(world, "worker-2") is None
    # `lotline run` takes failed lots off their back-off when it starts, and registers the same
    # job version again: neither brings back a lot given up on.
    assert world.lots.retry_now(world.ns, "parse") == 0
    world.job("parse", output="hits", inputs=["raw"])
    assert _next(world) is None
    assert world.lots.given_up(world.ns, "parse") == {LOT: 3}

    # An operator retries it: due at once, its count of failures back to 0.
    assert world.lots.retry(world.ns, "parse") == 1
    again = _next(world)
    assert again is not None and (again.lot, again.attempt, again.failures) == (LOT, 4, 0)
    world.lots.complete(again)
    assert world.lots.given_up(world.ns, "parse") == {}


def test_a_new_input_version_brings_a_given_up_lot_back(lineage: Lineage, clock: ManualClock) -> None:
    world = _world(lineage, clock)
    _fail_until_given_up(world, clock)
    world.lots.invalidate(world.ns, "raw", LOT)  # the sender fixes the file
    world.produce("ingest", LOT)
    fixed = _next(world)
    assert fixed is not None and (fixed.attempt, fixed.failures) == (4, 0)


def test_a_new_job_version_brings_a_given_up_lot_back(lineage: Lineage, clock: ManualClock) -> None:
    world = _world(lineage, clock)
    _fail_until_given_up(world, clock)
    world.lots.register_job(world.ns, "parse", output="hits", inputs=["raw"], code_digest="fixed")
    fixed = _next(world)
    assert fixed is not None and (fixed.attempt, fixed.failures) == (4, 0)


def test_the_count_is_configurable(lineage: Lineage, clock: ManualClock) -> None:
    world = _world(lineage, clock, max_attempts=5)
    _fail_until_given_up(world, clock, attempts=5)
    assert world.lots.given_up(world.ns, "parse") == {LOT: 5}
    assert _next(world) is None


def test_the_database_claim_path_does_not_take_a_given_up_lot(lineage: Lineage) -> None:
    """With the system clock (on PostgreSQL: the claim function ``lotline_claim_next_lot``). Without
    the give-up, ``retry_now`` would make the failed lot due at once."""
    world = _world(lineage, max_attempts=1)
    claim = _next(world)
    assert claim is not None
    world.lots.fail(claim, error="boom")
    assert world.lots.given_up(world.ns, "parse") == {LOT: 1}
    assert world.lots.retry_now(world.ns, "parse") == 0
    assert _next(world) is None and _next(world, "worker-2") is None
    assert world.lots.retry(world.ns, "parse", [LOT]) == 1
    again = _next(world, "worker-2")
    assert again is not None and (again.lot, again.attempt) == (LOT, 2)


@pytest.mark.parametrize("value", ["0", "abc", "-1", "2.5"])
def test_a_bad_max_attempts_is_refused_in_one_line(
    value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LOTLINE_MAX_ATTEMPTS", value)
    with pytest.raises(InvalidInput) as refused:
        load_settings(tmp_path)
    assert refused.value.message == (
        f"LOTLINE_MAX_ATTEMPTS must be a whole number of attempts, at least 1, got {value!r}."
    )


def test_max_attempts_is_read_from_the_environment_or_lotline_toml(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("LOTLINE_MAX_ATTEMPTS", raising=False)
    assert load_settings(tmp_path).max_attempts == 3
    (tmp_path / "lotline.toml").write_text('LOTLINE_MAX_ATTEMPTS = "5"\n')
    assert load_settings(tmp_path).max_attempts == 5
    monkeypatch.setenv("LOTLINE_MAX_ATTEMPTS", "7")
    assert load_settings(tmp_path).max_attempts == 7
