"""Retries that end (issue 39.6), on SQLite and PostgreSQL: a lot that fails ``max_attempts`` times
in a row on unchanged inputs and job version is given up on — no worker, no ``lotline run``
(``retry_now``), no re-registration of the same job version takes it — until an input lot gets a
new version, the job version changes, or an operator retries it (``LotService.retry``)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from coordination.test_failed_lots_and_back_off import LOT, _next
from coordination.test_failed_lots_and_back_off import _world as chain
from lotline.api.app import create_app
from lotline.cli.main import app
from lotline.domain.clock import SYSTEM_CLOCK, ManualClock
from lotline.domain.errors import InvalidInput
from lotline.services import Lineage
from lotline.services.config import Settings, load_settings
from support.lots import LotWorld


def _world(lineage: Lineage, clock: ManualClock | None = None, max_attempts: int = 3) -> LotWorld:
    """The back-off tests' chain (ingest → parse, one lot) over a lineage that gives up after
    ``max_attempts``."""
    timed = Lineage.over(
        lineage.store, lineage.storage, clock=clock or SYSTEM_CLOCK, max_attempts=max_attempts
    )
    return chain(LotWorld(timed))


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


def test_a_mapped_job_registered_again_does_not_take_an_hour_given_up_on(
    lineage: Lineage, clock: ManualClock
) -> None:
    """Registering hints a mapped job's input lots (five-minute lots), not its hours: the hints of
    an hour given up on are left out."""
    world = LotWorld(Lineage.over(lineage.store, lineage.storage, clock=clock, max_attempts=1))
    world.job("ingest", output="raw")
    world.job("hourly", output="hours", inputs=["raw"], mapping="PT5M->PT1H")
    world.produce("ingest", *[f"20230101PT5M{i:03d}" for i in range(12)])
    claim = world.lots.claim("worker-1", world.ns, "hourly")
    assert claim is not None and claim.lot == "20230101PT1H000"
    world.lots.fail(claim, error="boom")
    clock.advance(timedelta(days=1))
    world.job("hourly", output="hours", inputs=["raw"], mapping="PT5M->PT1H")
    assert world.lots.claim("worker-1", world.ns, "hourly") is None
    assert world.lots.given_up(world.ns, "hourly") == {"20230101PT1H000": 1}


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


@pytest.mark.parametrize("value", [0, -2, True, 2.5])
def test_a_service_refuses_a_bad_max_attempts(lineage: Lineage, value: object) -> None:
    with pytest.raises(
        InvalidInput, match=r"^max_attempts must be a whole number of attempts, at least 1, got "
    ):
        Lineage.over(lineage.store, lineage.storage, max_attempts=value)  # type: ignore[arg-type]


def test_max_attempts_is_read_from_the_environment_or_lotline_toml(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("LOTLINE_MAX_ATTEMPTS", raising=False)
    assert load_settings(tmp_path).max_attempts == 3
    (tmp_path / "lotline.toml").write_text('LOTLINE_MAX_ATTEMPTS = "5"\n')
    assert load_settings(tmp_path).max_attempts == 5
    monkeypatch.setenv("LOTLINE_MAX_ATTEMPTS", "7")
    assert load_settings(tmp_path).max_attempts == 7


def test_every_interface_says_a_lot_was_given_up_on(
    lineage: Lineage, backend_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`lotline status`, `lotline gaps`, the REST gap report, the lot page and the grid's tooltip
    say "gave up after N attempts"; `lotline retry` brings the lot back, and a lot that is not
    failed is refused in one line, changing nothing."""
    world = _world(lineage, max_attempts=1)
    claim = _next(world)
    assert claim is not None
    world.lots.fail(claim, error="ValueError: bad line")
    monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
    monkeypatch.chdir(tmp_path)
    cli = CliRunner()
    ns = ["-n", world.ns]

    status = cli.invoke(app, ["status", *ns, "--job", "parse", "--lots"])
    assert status.exit_code == 0, status.output
    assert "job parse: 1 failed lot given up on (`lotline retry parse` retries them)" in status.output
    [failed] = [line for line in status.output.splitlines() if line.split()[:2] == ["hits", LOT]]
    assert failed.split()[-8:] == [
        "gave", "up", "after", "1", "attempt;", "ValueError:", "bad", "line",
    ]  # fmt: skip
    listed = json.loads(cli.invoke(app, ["status", *ns, "--job", "parse", "--json"]).stdout)
    assert [(r["lot"], r["gaveUpAfter"]) for r in listed["lots"]] == [(LOT, 1)]

    span = ["--from", "2023-01-01T04:00:00Z", "--to", "2023-01-01T05:00:00Z"]
    gaps = cli.invoke(app, ["gaps", *ns, "--job", "parse", *span])
    assert gaps.exit_code == 0, gaps.output
    assert "attempt 1, gave up after 1 attempt: ValueError: bad line" in gaps.output

    app_ = create_app(Settings(db_url=backend_url, warehouse=str(tmp_path / "w"), api_token=None))
    app_.state.lineage = world.lineage  # the app's routes over this test's services
    client = TestClient(app_, base_url="http://127.0.0.1")
    answer = client.get(
        f"/api/v1/namespaces/{world.ns}/jobs/parse/gaps",
        params={"from": "2023-01-01T04:00:00Z", "to": "2023-01-01T05:00:00Z"},
    )
    assert answer.status_code == 200, answer.text
    [failed] = [r for r in answer.json()["runs"] if r["state"] == "failed"]
    assert (failed["from"], failed["attempt"], failed["gaveUpAfter"]) == (LOT, 1, 1)
    lots = client.get(f"/api/v1/namespaces/{world.ns}/jobs/parse/lots").json()["lots"]
    assert [(r["lot"], r["status"], r["gaveUpAfter"]) for r in lots] == [(LOT, "ERROR", 1)]
    page = client.get(f"/datasets/{world.ns}/hits/lots/{LOT}").text
    assert 'data-gave-up="1">gave up after 1 attempt</span>' in page
    [retry_url] = re.findall(r'<button id="retry" data-action="POST" data-url="([^"]+)"', page)
    assert retry_url == f"/api/v1/namespaces/{world.ns}/jobs/parse/retry?lot={LOT}"
    grid = client.get(f"/jobs/{world.ns}/parse/lots?from=2023-01-01T04:00:00Z&to=2023-01-01T05:00:00Z").text
    [cell] = re.findall(rf'<a [^>]*data-lot="{LOT}"[^>]*>', grid)
    assert "failed, gave up after 1 attempt" in cell and 'data-gave-up="1"' in cell

    # Bad input: a lot that is not failed, an unknown job, a bad setting: one line, nothing changed.
    refused = cli.invoke(app, ["retry", "parse", LOT, "20230101PT5M051", *ns])
    assert refused.exit_code == 2
    assert refused.stderr.strip().splitlines() == [
        f"lotline: error: Job {world.ns}:parse has no failed lot 20230101PT5M051 waiting to be retried; "
        "nothing was retried."
    ]
    assert cli.invoke(app, ["retry", "nosuchjob", *ns]).exit_code == 2
    monkeypatch.setenv("LOTLINE_MAX_ATTEMPTS", "abc")
    bad = cli.invoke(app, ["retry", "parse", *ns])
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "LOTLINE_MAX_ATTEMPTS must be a whole number of attempts, at least 1, got 'abc'." in bad.stderr
    refused_api = client.post(
        f"/api/v1/namespaces/{world.ns}/jobs/parse/retry", params={"lot": "20230101PT5M051"}
    )
    assert refused_api.status_code == 409, refused_api.text
    assert world.lots.given_up(world.ns, "parse") == {LOT: 1}
    monkeypatch.delenv("LOTLINE_MAX_ATTEMPTS")

    retried = cli.invoke(app, ["retry", "parse", *ns])
    assert retried.exit_code == 0, retried.output
    assert retried.stdout.strip() == "job parse: 1 failed lot to be retried"
    assert world.lots.given_up(world.ns, "parse") == {}
    again = _next(world)
    assert again is not None and (again.lot, again.attempt, again.failures) == (LOT, 2, 0)

    # The REST API's retry (the lot page's button) is the same service method.
    world.lots.fail(again, error="ValueError: bad line")
    answer = client.post(retry_url)  # the lot page's retry button
    assert (answer.status_code, answer.json()) == (200, {"retried": 1})
    assert _next(world) is not None
