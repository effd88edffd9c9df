"""Gap reports and backfill (docs/lots.md) on SQLite and PostgreSQL: exact counts and runs, bad
input, dry runs, and backfills that workers then act on."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, select

from lotline.domain.checks import CheckFailed
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.gaps import GapState, LotRun, report_json
from lotline.store.schema import jobs, lot_frontier
from support.lots import LotWorld

DAY = "2023-01-01"
NEXT_DAY = "2023-01-02"


def hour(n: int) -> str:
    return f"20230101PT1H{n:03d}"


def five(n: int) -> str:
    return f"20230101PT5M{n:03d}"


def _run(world: LotWorld, job: str, lot: str, *, ok: bool = True, worker: str = "worker-1") -> None:
    claim = world.claim(job, lot, worker=worker)
    assert claim is not None
    if ok:
        world.lots.complete(claim)
    else:
        world.lots.fail(claim, error=f"ValueError: bad line in {lot}")


@pytest.fixture
def day(world: LotWorld) -> LotWorld:
    """One day of hour lots: land -> raw -> (clean) -> cleaned, in every state a report knows.

    raw: 00-21 READY, 22 failed, 23 never produced; 03 invalidated (RESUBMIT).
    cleaned: 00-09 complete but 03 (reopened by the cascade, and raw 03 is not READY: blocked),
    10 running, 11 failed, 12 failed and cleaned (failed all the same), 13 held, 14-21 missing,
    22 and 23 blocked (raw 22 failed, raw 23 missing).
    """
    world.job("land", output="raw")
    world.job("clean", output="cleaned", inputs=["raw"])
    for n in range(22):
        _run(world, "land", hour(n))
    _run(world, "land", hour(22), ok=False)
    for n in range(10):
        _run(world, "clean", hour(n))
    assert world.claim("clean", hour(10), worker="busy") is not None
    _run(world, "clean", hour(11), ok=False)
    _run(world, "clean", hour(12), ok=False)
    world.lots.clean(world.ns, "clean", hour(12))
    world.lots.hold_lot(world.ns, "cleaned", hour(13))
    world.lots.invalidate(world.ns, "raw", hour(3))
    return world


EXPECTED_RUNS = [
    ("blocked", hour(3), hour(3), 1, ("raw", hour(3), hour(3), "missing")),
    ("running", hour(10), hour(10), 1, None),
    ("failed", hour(11), hour(11), 1, (1, f"ValueError: bad line in {hour(11)}")),
    ("failed", hour(12), hour(12), 1, (1, f"ValueError: bad line in {hour(12)}")),  # its data removed
    ("held", hour(13), hour(13), 1, None),
    ("missing", hour(14), hour(21), 8, None),
    ("blocked", hour(22), hour(22), 1, ("raw", hour(22), hour(22), "failed")),
    ("blocked", hour(23), hour(23), 1, ("raw", hour(23), hour(23), "missing")),
]


def _why(run: LotRun) -> object:
    if run.cause is not None:
        return (run.cause.dataset, run.cause.first, run.cause.last, run.cause.state.value)
    return None if run.failure is None else (run.failure.attempt, run.failure.reason)


def _shape(runs: list[LotRun]) -> list[tuple[object, ...]]:
    return [(r.state.value, r.first, r.last, r.count, _why(r)) for r in runs]


def test_a_day_in_every_state_gives_exact_counts_and_runs(day: LotWorld) -> None:
    report = day.lineage.gaps.report(day.ns, job="clean", start=DAY, end=NEXT_DAY)
    assert (report.dataset, report.job, str(report.interval), report.total) == (
        "cleaned",
        "clean",
        "PT1H",
        24,
    )
    assert {s.value: n for s, n in report.counts.items()} == {
        "complete": 9,
        "stale": 0,
        "running": 1,
        "failed": 2,
        "missing": 8,
        "held": 1,
        "blocked": 3,
        "pending": 0,
    }
    assert _shape(report.runs) == EXPECTED_RUNS
    by_dataset = day.lineage.gaps.report(day.ns, dataset="cleaned", start=DAY, end=NEXT_DAY)
    assert report_json(by_dataset) == report_json(report)


def test_the_range_maps_to_the_lots_whose_windows_it_touches(day: LotWorld) -> None:
    """From 10:30 to 13:00: lots 10, 11 and 12 (13 starts at the exclusive end)."""
    report = day.lineage.gaps.report(
        day.ns, job="clean", start="2023-01-01T10:30:00Z", end="2023-01-01T14:00:00+01:00"
    )
    assert report.total == 3
    assert _shape(report.runs) == EXPECTED_RUNS[1:4]


def test_the_source_dataset_and_a_held_job(day: LotWorld) -> None:
    raw = day.lineage.gaps.report(day.ns, job="land", start=DAY, end=NEXT_DAY)
    assert _shape(raw.runs) == [
        ("missing", hour(3), hour(3), 1, None),
        ("failed", hour(22), hour(22), 1, (1, f"ValueError: bad line in {hour(22)}")),
        ("missing", hour(23), hour(23), 1, None),
    ]
    day.lots.hold_job(day.ns, "clean")
    held = day.lineage.gaps.report(day.ns, job="clean", start=DAY, end=NEXT_DAY)
    assert {s.value: n for s, n in held.counts.items() if n} == {"complete": 9, "running": 1, "held": 14}


def test_complete_means_ready_whatever_the_data(world: LotWorld) -> None:
    """An empty lot (a run that wrote nothing) is READY like any other: present, not a gap."""
    world.job("land", output="raw")
    _run(world, "land", hour(0))
    report = world.lineage.gaps.report(world.ns, job="land", start=DAY, end="2023-01-01T01:00:00Z")
    assert (report.total, report.counts[GapState.COMPLETE], report.runs) == (1, 1, [])


def test_a_mapped_job_is_blocked_by_the_five_minute_lot_it_waits_for(world: LotWorld) -> None:
    world.job("land", output="raw5")
    world.job("hourly", output="hours", inputs=["raw5"], mapping="PT5M->PT1H")
    for n in (*range(12), *range(12, 23)):  # hour 0 whole, hour 1 without its last lot
        _run(world, "land", five(n))
    report = world.lineage.gaps.report(world.ns, job="hourly", start=DAY, end="2023-01-01T03:00:00Z")
    assert str(report.interval) == "PT1H"
    assert _shape(report.runs) == [
        ("missing", hour(0), hour(0), 1, None),
        # One run of missing input lots (23-35) holds back hours 1 and 2: one run, one cause.
        ("blocked", hour(1), hour(2), 2, ("raw5", five(23), five(35), "missing")),
    ]


def test_named_lots_are_reported_from_the_rows_that_exist(world: LotWorld) -> None:
    world.job("land", output="raw")
    world.produce("land", "2023-01-01", "2023-01-02")
    _run(world, "land", "2023-01-03", ok=False)
    report = world.lineage.gaps.report(world.ns, dataset="raw", start=DAY, end="2023-01-05")
    assert report.interval is None
    assert (report.total, report.counts[GapState.COMPLETE], report.counts[GapState.MISSING]) == (3, 2, 0)
    assert _shape(report.runs) == [
        ("failed", "2023-01-03", "2023-01-03", 1, (1, "ValueError: bad line in 2023-01-03"))
    ]
    assert report_json(report)["runs"][0]["reason"] == "ValueError: bad line in 2023-01-03"  # type: ignore[index]


def test_a_check_failure_is_counted_by_its_kind_not_by_its_text(world: LotWorld) -> None:
    """Issue 43.4: the kind is data on the failure (``runs.error_kind``). A failing check counts,
    whatever its line says; an error whose text reads like a check's does not."""
    world.job("land", output="raw")
    failures = {
        "2023-01-01": CheckFailed("output raw: row_count between 1 and any failed: 0 rows"),
        "2023-01-02": "ValueError: check dep_delay IS NOT NULL failed: 3 rows",
        "2023-01-03": ValueError("bad line"),
    }
    for lot, error in failures.items():
        claim = world.claim("land", lot)
        assert claim is not None
        world.lots.fail(claim, error=error)
    report = world.lineage.gaps.report(world.ns, dataset="raw", start=DAY, end="2023-01-05")
    assert (report.counts[GapState.FAILED], report.failed_by_check) == (3, 1)
    kinds = {r.first: r.failure.kind for r in report.runs if r.failure is not None}
    assert kinds == {"2023-01-01": CheckFailed.code, "2023-01-02": None, "2023-01-03": None}


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"job": "clean", "start": NEXT_DAY, "end": DAY}, InvalidInput, "must be before"),
        ({"job": "clean", "start": DAY, "end": DAY}, InvalidInput, "must be before"),
        ({"job": "nope", "start": DAY, "end": NEXT_DAY}, NotFound, "nope"),
        ({"job": "clean", "start": "yesterday", "end": NEXT_DAY}, InvalidInput, "RFC 3339"),
        ({"job": "clean", "start": "2023-02-30", "end": NEXT_DAY}, InvalidInput, "not a valid date"),
        ({"job": "clean", "start": "2023-01-01T00:00+0100", "end": NEXT_DAY}, InvalidInput, "RFC 3339"),
        ({"job": "clean", "start": "2012-12-31", "end": "2023-01-02"}, InvalidInput, "ten years"),
        ({"job": "clean", "start": DAY, "end": NEXT_DAY, "interval": "PT7M"}, InvalidInput, "divide"),
        ({"start": DAY, "end": NEXT_DAY}, InvalidInput, "either a job or a dataset"),
        ({"job": "clean", "dataset": "raw", "start": DAY, "end": NEXT_DAY}, InvalidInput, "either"),
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(
    day: LotWorld, arguments: dict[str, str], error: type[Exception], message: str
) -> None:
    before = day.table()
    with pytest.raises(error, match=message):
        day.lineage.gaps.report(day.ns, **arguments)
    if "job" in arguments and "dataset" not in arguments:
        with pytest.raises(error, match=message):
            day.lineage.gaps.backfill(day.ns, arguments["job"], **_range(arguments))
    assert day.table() == before


def _range(arguments: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in arguments.items() if k in ("start", "end", "interval")}


def test_an_unknown_interval_must_be_given(world: LotWorld) -> None:
    world.job("land", output="raw")
    with pytest.raises(InvalidInput, match="pass the interval"):
        world.lineage.gaps.report(world.ns, job="land", start=DAY, end=NEXT_DAY)
    report = world.lineage.gaps.report(world.ns, job="land", start=DAY, end=NEXT_DAY, interval="PT1H")
    assert _shape(report.runs) == [("missing", hour(0), hour(23), 24, None)]
    world.job("hourly", output="hours", inputs=["raw"], mapping="PT5M->PT1H")
    with pytest.raises(InvalidInput, match="has PT1H lots"):
        world.lineage.gaps.report(world.ns, job="hourly", start=DAY, end=NEXT_DAY, interval="PT5M")


def test_backfill_refuses_bad_choices_and_unregistered_jobs(day: LotWorld) -> None:
    before = day.table()
    with pytest.raises(InvalidInput, match="cannot take 'running'"):
        day.lineage.gaps.backfill(day.ns, "clean", start=DAY, end=NEXT_DAY, only=["missing,running"])
    day.lineage.catalog.upsert_job(day.ns, "loose")
    with pytest.raises(Conflict, match="register it first"):
        day.lineage.gaps.backfill(day.ns, "loose", start=DAY, end=NEXT_DAY)
    assert day.table() == before


def _drain(world: LotWorld, job: str) -> list[str]:
    """Claim and complete until nothing is eligible; the lots taken, in order."""
    taken = []
    while (claim := world.claim(job, worker="drainer")) is not None:
        taken.append(claim.lot)
        world.lots.complete(claim)
    return taken


def _forget_work_list(world: LotWorld, job: str) -> None:
    """The job's work list loses its hints (as after restoring it from an older backup)."""
    with world.lineage.store.write() as connection:
        ids = select(jobs.c.id).where(jobs.c.name == job)
        connection.execute(delete(lot_frontier).where(lot_frontier.c.job_id.in_(ids)))


def test_backfill_of_failed_and_missing_lots_is_what_workers_claim_next(day: LotWorld) -> None:
    _forget_work_list(day, "clean")
    assert day.claim("clean") is None
    before = day.table()
    dry = day.lineage.gaps.backfill(
        day.ns, "clean", start=DAY, end=NEXT_DAY, only=["missing,failed"], dry_run=True
    )
    assert dry.dry_run and day.table() == before
    assert day.claim("clean") is None  # a dry run raised no hint either
    assert [(r.state.value, r.first, r.last) for r in dry.hinted] == [
        ("failed", hour(11), hour(11)),
        ("failed", hour(12), hour(12)),
        ("missing", hour(14), hour(21)),
    ]
    assert dry.reopened == [] and dry.unhinted == []
    assert [r.state.value for r in dry.left] == ["blocked", "running", "held", "blocked", "blocked"]
    done = day.lineage.gaps.backfill(day.ns, "clean", start=DAY, end=NEXT_DAY, only=["missing", "failed"])
    assert not done.dry_run and done.hinted == dry.hinted
    assert _drain(day, "clean") == [hour(n) for n in (11, 12, *range(14, 22))]
    assert day.status("cleaned", hour(0), "clean") == "READY"  # complete lots were not touched


def test_backfill_of_everything_reopens_ready_lots_with_the_cascade(day: LotWorld) -> None:
    day.job("report", output="reported", inputs=["cleaned"])
    assert _drain(day, "report") == [hour(n) for n in (0, 1, 2, 4, 5, 6, 7, 8, 9)]
    dry = day.lineage.gaps.backfill(day.ns, "clean", start=DAY, end="2023-01-01T12:00:00Z", dry_run=True)
    assert [(r.first, r.last, r.count) for r in dry.reopened] == [
        (hour(0), hour(2), 3),
        (hour(4), hour(9), 6),
    ]
    assert day.status("reported", hour(0), "report") == "READY"
    done = day.lineage.gaps.backfill(day.ns, "clean", start=DAY, end="2023-01-01T12:00:00Z")
    assert (sum(r.count for r in done.reopened), done.cascaded) == (9, 9)
    assert day.status("cleaned", hour(0), "clean") == "RESUBMIT"
    assert day.status("reported", hour(0), "report") == "RESUBMIT"
    assert day.status("cleaned", hour(12), "clean") == "ERROR"  # outside the range: untouched
    # Failed hour 11 is in the range: due at once; failed hour 12 waits for its back-off.
    assert _drain(day, "clean") == [hour(n) for n in (0, 1, 2, 4, 5, 6, 7, 8, 9, 11, *range(14, 22))]
    assert _drain(day, "report")[:9] == [hour(n) for n in (0, 1, 2, 4, 5, 6, 7, 8, 9)]


def test_backfill_of_a_source_job_names_the_lots_to_claim_by_name(day: LotWorld) -> None:
    done = day.lineage.gaps.backfill(day.ns, "land", start=DAY, end=NEXT_DAY, only=["missing"])
    assert done.hinted == []
    assert [(r.first, r.last) for r in done.unhinted] == [(hour(3), hour(3)), (hour(23), hour(23))]
    assert [r.state.value for r in done.left] == ["failed"]


def test_a_time_without_an_offset_is_utc_as_in_the_web_ui(day: LotWorld) -> None:
    """``2023-01-01T06:00:00`` is the instant the UI and ``lotline run`` read: UTC (issue 39.7)."""
    gaps = day.lineage.gaps
    plain = gaps.report(day.ns, job="clean", start="2023-01-01T00:00:00", end="2023-01-01T06:00")
    zoned = gaps.report(day.ns, job="clean", start="2023-01-01T00:00:00Z", end="2023-01-01T06:00:00+00:00")
    assert report_json(plain) == report_json(zoned) and plain.total == 6
    dry = gaps.backfill(day.ns, "clean", start="2023-01-01T00:00:00", end="2023-01-01T06:00:00", dry_run=True)
    assert dry.report.total == 6


def test_a_backfill_preview_counts_downstream_as_the_backfill_does(day: LotWorld) -> None:
    """Issue 39.3: the dry run walks the cascade (in a transaction rolled back) and changes nothing;
    the backfill then reopens exactly what it said."""
    gaps, ns = day.lineage.gaps, day.ns
    before = (day.table(), day.lineage.lot_events.last_position())
    six_hours = {"start": DAY, "end": "2023-01-01T06:00:00Z"}
    preview = gaps.backfill(ns, "land", **six_hours, only=["complete"], dry_run=True)
    assert (day.table(), day.lineage.lot_events.last_position()) == before  # nothing changed
    # land 00-05 but 03 (reopened already) are complete: 5 lots; clean made 00-02, 04, 05 from them.
    assert (sum(r.count for r in preview.reopened), preview.cascaded) == (5, 5)
    done = gaps.backfill(ns, "land", **six_hours, only=["complete"])
    assert (sum(r.count for r in done.reopened), done.cascaded) == (
        sum(r.count for r in preview.reopened),
        preview.cascaded,
    )
