"""Gap reports and backfill (docs/lots.md): which lots of a time range are not complete, and making
them eligible again.

A report is one read transaction of a few aggregated statements per dataset (the target and, for
its missing or failed lots, each input): its cost follows the lots that are *not* complete, not
the length of the range. When the READY counts it read have piled up deltas, a write of its own
follows that compacts them (docs/lots.md, "Who compacts the counts").
"""

from __future__ import annotations

import contextlib
import datetime
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from lotline.coordination.registry import LotJob, find_lot_job, namespace_lot_jobs
from lotline.domain import gaps as g
from lotline.domain import grid as lot_grid
from lotline.domain import ready_counts as rc
from lotline.domain.arrival import DEFAULT_POLICY, Absence
from lotline.domain.checks import published_with_warnings
from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.errors import Conflict, InvalidInput, NotFound, Unavailable
from lotline.domain.gaps import Backfill, GapReport, GapState, Segment, TimeRange
from lotline.domain.grid import Grid, Health, Matrix, OutputHealth, Resolution
from lotline.domain.lots import (
    Interval,
    IntervalLot,
    covered_indexes,
    lot_at,
    lot_from_index,
    lot_index,
    parse_lot,
)
from lotline.domain.model import DatasetRef
from lotline.services import _common
from lotline.services.lots import LotService, lot_job_named
from lotline.store.engine import Store
from lotline.store.queries import arrival, datasets, frontier, gaps, registry, runs
from lotline.store.types import utcnow

#: How far up a chain of unmapped jobs the interval of a dataset is looked for.
MAX_CHAIN = 64
#: The most jobs of one namespace whose lot health one page reads.
MAX_NAMESPACE_JOBS = 500
#: A report compacts the counts it read when their delta rows outnumber their keys by more than
#: the keys again and by more than this (docs/lots.md, "Who compacts the counts").
DUST_FLOOR = 64


@dataclass(frozen=True)
class _Dust:
    """Count keys ``[key_from, key_to]`` of a dataset whose delta rows a report found worth merging."""

    dataset_id: uuid.UUID
    key_from: str
    key_to: str


@dataclass(frozen=True)
class LotState:
    """One lot in the words of every page: its state, when it is due, and the report's run of it
    (what a blocked lot waits on, why a failed lot failed); an empty lot: who declared it."""

    state: lot_grid.CellState
    due_at: datetime.datetime
    due: bool
    run: g.LotRun | None
    declared_by: str | None


@dataclass(frozen=True)
class _Target:
    """The dataset a report is about, and its producing job's lot job (None: no producer)."""

    dataset_id: uuid.UUID
    dataset: str
    job: str | None
    lot_job: LotJob | None


class GapService:
    def __init__(self, store: Store, lots: LotService, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._lots = lots
        self._clock = clock

    def report(
        self,
        namespace: str,
        *,
        job: str | None = None,
        dataset: str | None = None,
        start: str | None = None,
        end: str | None = None,
        interval: str | None = None,
    ) -> GapReport:
        """Counts by state and runs of the lots not complete, of ``job``'s output or of ``dataset``,
        over ``[start, end)`` (RFC 3339 instants or dates; by default from the first lot, at most
        ``DEFAULT_SPAN`` back, to now)."""
        now = self._clock.now()
        with self._reading() as (connection, dust):
            target = _target(connection, namespace, job, dataset)
            span, wanted = _range_of(connection, namespace, target, start, end, interval, now)
            report = _report(connection, namespace, target, span, wanted, dust, now)[0]
        return report

    def counted(
        self,
        namespace: str,
        *,
        job: str | None = None,
        dataset: str | None = None,
        start: str | None = None,
        end: str | None = None,
        interval: str | None = None,
    ) -> tuple[GapReport, Health]:
        """The report of ``[start, end)`` (``report``'s defaults) and its lots counted as every page
        counts them (the grid's states: empty lots apart from complete ones, and those published
        with warnings), so that the command line says what the web UI says. One read transaction."""
        now = self._clock.now()
        with self._reading() as (connection, dust):
            target = _target(connection, namespace, job, dataset)
            span, wanted = _range_of(connection, namespace, target, start, end, interval, now)
            held = target.lot_job is not None and target.lot_job.held
            due = lot_grid.DueRange(span.start, span.end, to_now=span.end == now)
            looked_up = _interval(connection, namespace, target, wanted)
            if looked_up is None:
                report = _named_report(connection, namespace, target, span)
                return report, Health(namespace, target.job, target.dataset, held, due, _named_totals(report))
            grid = _grid(connection, namespace, target, span, None, dust, now, wanted, known=looked_up)
            newest = _newest(connection, target, looked_up)
        warned = sum(cell.warned for cell in grid.cells)
        health = Health(namespace, target.job, target.dataset, held, due, grid.totals(), warned, *newest)
        return grid.report, health

    def grid(
        self,
        namespace: str,
        *,
        job: str | None = None,
        dataset: str | None = None,
        start: str,
        end: str,
        resolution: str | None = None,
        interval: str | None = None,
    ) -> Grid:
        """The report of ``[start, end)`` as a lot grid (``domain.grid``): one cell per lot, hour or
        day (``resolution``; by default the finest that keeps the grid small), empty lots told
        apart from complete ones. One read transaction, like the report."""
        chosen = None if resolution is None else _resolution(resolution)
        span, wanted = _arguments(start, end, interval)
        now = self._clock.now()
        with self._reading() as (connection, dust):
            target = _target(connection, namespace, job, dataset)
            grid = _grid(connection, namespace, target, span, chosen, dust, now, wanted)
        return grid

    def outputs(self, namespace: str, job: str, *, start: str, end: str) -> tuple[OutputHealth, ...]:
        """Each output of a job with several over ``[start, end)``, counted as its own grid counts
        it (nothing for a job with one output): what the job's grid page offers to draw. One read
        transaction."""
        span = TimeRange.parse(start, end)
        now = self._clock.now()
        with self._reading() as (connection, dust):
            target, lot_job = _job_target(connection, namespace, job)
            if len(lot_job.outputs) < 2:
                return ()
            first = _grid(connection, namespace, target, span, None, dust, now, None)
            found = _outputs(connection, namespace, target, span, first, dust, now)
        return found

    def lot_state(self, namespace: str, dataset: str, lot: IntervalLot) -> LotState:
        """One interval lot as every page names it (the grid's words: empty told apart), with when
        it is (or was) due and, for a missing, blocked or failed lot, why. One read transaction."""
        now = self._clock.now()
        with self._reading() as (connection, dust):
            target = _dataset_target(connection, namespace, dataset)
            report, states = _told(connection, namespace, target, [str(lot)], lot.interval, dust, now)
            due_at = lot.end + _arrival_of(connection, target).late_after
            state = states[str(lot)]
            declared = None
            if state is lot_grid.CellState.EMPTY:
                declared = gaps.declared_empty_by(connection, target.dataset_id, str(lot))
        run = report.runs[0] if report.runs else None
        return LotState(state, due_at, due_at <= now, run, declared)

    def lot_states(self, namespace: str, dataset: str, lots: Sequence[str]) -> dict[str, lot_grid.CellState]:
        """Lots of one dataset, each as every page names it (``lot_state``'s word): what ``lotline
        status`` and the lot lists say. One read transaction, one report over the lots' span."""
        if not lots:
            return {}
        now = self._clock.now()
        with self._reading() as (connection, dust):
            target = _dataset_target(connection, namespace, dataset)
            states = _told(connection, namespace, target, lots, None, dust, now)[1]
        return states

    def span(
        self, namespace: str, *, job: str | None = None, dataset: str | None = None
    ) -> tuple[datetime.datetime, datetime.datetime] | None:
        """From the start of the first lot to the end of the last one that the dataset or its
        producer's inputs have rows for (None: named lots, or no lots yet): where the dataset's
        lots are due, so the range a grid shows when none is asked for, and beyond which it
        draws no cell. The inputs count because lots their producer has not touched yet (no row)
        are still the dataset's missing or blocked lots."""
        with self._store.read() as connection:
            return _span(connection, namespace, _target(connection, namespace, job, dataset))

    def health(
        self,
        namespace: str,
        *,
        job: str | None = None,
        dataset: str | None = None,
        start: str | None = None,
        end: str | None = None,
        now: datetime.datetime,
    ) -> Health:
        """The job's or dataset's lots due in ``[start, end)`` (by default the grid's default
        range) by state, counted as its grid counts them. One read transaction."""
        with self._reading() as (connection, dust):
            target = _target(connection, namespace, job, dataset)
            health = _health(connection, namespace, target, start, end, now, dust)
        return health

    def freshness(
        self, namespace: str, *, job: str | None = None, dataset: str | None = None
    ) -> dict[str, object] | None:
        """The job's or dataset's freshness as the REST resources give it (None: it has no time
        lots, or the job has none: a lineage-only job)."""
        now = self._clock.now()
        try:
            health = self.health(namespace, job=job, dataset=dataset, now=now)
        except (NotFound, Conflict):  # a dataset with no lots, a job lotline does not coordinate
            return None
        return None if health.range is None else health.freshness_json(now)

    def namespace_health(
        self,
        namespace: str,
        *,
        start: str | None = None,
        end: str | None = None,
        now: datetime.datetime,
        limit: int = MAX_NAMESPACE_JOBS,
    ) -> list[Health]:
        """The health of every coordinated job of the namespace (the first ``limit`` by name), in
        dependency order. One read transaction."""
        with self._reading() as (connection, dust):
            found = _namespace_targets(connection, namespace, limit)
            healths = [_health(connection, namespace, target, start, end, now, dust) for target in found]
        return healths

    def matrix(
        self,
        namespace: str,
        *,
        start: str | None = None,
        end: str | None = None,
        resolution: str | None = None,
        now: datetime.datetime,
        limit: int = MAX_NAMESPACE_JOBS,
    ) -> Matrix:
        """The namespace's lots by jobs: each coordinated job of time lots (dependency order) as one
        row of grid cells, all rows over the same range on one time axis, each at its own lots'
        resolution (``domain.grid.row_resolution``), so a column is one time. One read transaction."""
        chosen = None if resolution is None else _resolution(resolution)
        with self._reading() as (connection, dust):
            rows: list[tuple[_Target, Interval, tuple[datetime.datetime, datetime.datetime] | None]] = []
            for target in _namespace_targets(connection, namespace, limit):
                try:
                    interval = _interval(connection, namespace, target, None)
                except InvalidInput:  # no lots yet
                    continue
                if interval is not None:
                    rows.append((target, interval, _span(connection, namespace, target, interval)))
            spans = [span for _, _, span in rows if span is not None]
            if not spans and (start is None or end is None):
                return Matrix(namespace, None, None, [])
            union = (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None
            due = lot_grid.due_range(start, end, union, now)
            if due.empty:
                return Matrix(namespace, due, None, [])
            shown = TimeRange(due.start, due.end)
            intervals = [interval for _, interval, _ in rows]
            common = lot_grid.matrix_resolution(intervals, shown, chosen)
            width = lot_grid.column_minutes(intervals, common)
            grids: list[tuple[Health, Grid | None]] = []
            for target, interval, span in rows:  # a row's totals are its health: the same lots, alike
                held = target.lot_job is not None and target.lot_job.held
                if span is None and (start is None or end is None):  # as its health: no lots yet
                    grids.append((Health(namespace, target.job, target.dataset, held, None, {}), None))
                    continue
                own = lot_grid.row_resolution(interval, width)
                grid = _grid(connection, namespace, target, shown, own, dust, now, known=interval)
                totals = {s: n for s, n in grid.totals().items() if n}
                outputs = _outputs(connection, namespace, target, shown, grid, dust, now)
                health = Health(namespace, target.job, target.dataset, held, due, totals, outputs=outputs)
                grids.append((health, grid))
        return Matrix(namespace, due, common, grids, width)

    def backfill(
        self,
        namespace: str,
        job: str,
        *,
        start: str,
        end: str,
        only: Sequence[str] | None = None,
        dry_run: bool = False,
        interval: str | None = None,
    ) -> Backfill:
        """Make the job's lots of ``[start, end)`` eligible: READY ones are reopened through the
        invalidation cascade (stale ones, made by an older job version, among them), missing and
        failed ones get a work-list hint; blocked, held and running lots are left and reported.
        ``only`` narrows to some of complete/stale/missing/failed."""
        taken = g.parse_only(only)
        span, wanted = _arguments(start, end, interval)
        now = self._clock.now()
        with self._reading() as (connection, dust):
            target, lot_job = _job_target(connection, namespace, job)
            report, found = _report(connection, namespace, target, span, wanted, dust, now)
            if report.interval is None:
                raise InvalidInput(
                    f"Dataset {namespace}:{target.dataset} has named lots, which have no time window; "
                    "claim them by name instead."
                )
            lots_of = report.interval
            stale = g.lot_ids([s for s in found if s.state is GapState.STALE], lots_of)
            reopen: list[str] = stale if GapState.STALE in taken else []
            if GapState.COMPLETE in taken and report.counts[GapState.COMPLETE]:
                first, stop = span.indexes(lots_of)
                ready = gaps.ready_lots(
                    connection,
                    target.dataset_id,
                    str(lot_from_index(first, lots_of)),
                    str(lot_from_index(stop - 1, lots_of)),
                    g.id_pattern(lots_of),
                )  # stale lots among them, taken only when asked
                reopen = ready if GapState.STALE in taken else sorted(set(ready) - set(stale))
        chosen = [s for s in found if s.state in taken and s.state not in g.REOPENED_STATES]
        left = [s for s in found if s.state not in taken]
        hintable = bool(lot_job.inputs)
        cascaded = 0
        if reopen:  # set-wise: a year of lots and their downstream in a few statements per level
            asked = set(reopen)  # a dry run walks the same cascade in a transaction rolled back
            made = self._lots.invalidate_many(namespace, target.dataset, reopen, dry_run=dry_run)
            cascaded = self._downstream(made, lot_job.job_id, asked)
        if not dry_run and chosen and hintable:
            with self._store.write() as connection:
                frontier.raise_for_job(connection, lot_job.job_id, g.lot_ids(chosen, lots_of), utcnow())
        was_stale = set(stale)
        reopened = g.coalesce(
            Segment(i, i + 1, GapState.STALE if lot in was_stale else GapState.COMPLETE)
            for i, lot in sorted((g.index_of(lot, lots_of), lot) for lot in reopen)
        )
        return Backfill(
            report,
            dry_run,
            g.runs(reopened, lots_of),
            cascaded,
            g.runs(chosen, lots_of) if hintable else [],
            [] if hintable else g.runs(chosen, lots_of),
            g.runs(left, lots_of),
        )

    def stale(self, namespace: str, job: str) -> tuple[list[g.LotRun], TimeRange | None]:
        """The job's stale lots (made by an older version of it) from its first lot up to now, at
        most ``MAX_RANGE`` back from the last, as the report's runs, and the range from the first
        stale lot's start to the last one's end (None: none stale, or named lots, which have no
        range)."""
        span = self.span(namespace, job=job)
        if span is None:
            try:
                found = self.report(namespace, job=job).runs
            except InvalidInput:  # no lots yet
                return [], None
            return [r for r in found if r.state is GapState.STALE], None
        start = max(span[0], span[1] - g.MAX_RANGE)
        report = self.report(namespace, job=job, start=_iso(start), end=_iso(span[1]))
        found = [r for r in report.runs if r.state is GapState.STALE]
        if not found:
            return [], None
        first, last = parse_lot(found[0].first), parse_lot(found[-1].last)
        if not isinstance(first, IntervalLot) or not isinstance(last, IntervalLot):
            return found, None
        return found, TimeRange(first.start, last.end)

    def recompute_stale(self, namespace: str, job: str) -> int:
        """A job declared ``on_change="recompute"``: its stale lots (``stale``) reopened with the
        usual cascade, as ``backfill --only stale`` does; how many. Named lots have no range to
        backfill: they stay flagged stale."""
        _, span = self.stale(namespace, job)
        if span is None:
            return 0
        only = [GapState.STALE.value]
        done = self.backfill(namespace, job, start=_iso(span.start), end=_iso(span.end), only=only)
        return sum(run.count for run in done.reopened)

    def _downstream(self, made: Sequence[DatasetRef], job_id: uuid.UUID, asked: set[str]) -> int:
        """The lots a reopening reached beyond those asked, each lot of a job once whatever the
        job's outputs (a job with two outputs reopens two rows per lot)."""
        with self._store.read() as connection:
            producers = {}
            for namespace, name in {(r.namespace, r.name) for r in made}:
                producers[(namespace, name)] = registry.producer_of(
                    connection, _common.require_dataset(connection, namespace, name)
                )
        reached = {(producers[(r.namespace, r.name)], r.lot) for r in made}
        return len({(job, lot) for job, lot in reached if not (job == job_id and lot in asked)})

    @contextlib.contextmanager
    def _reading(self) -> Iterator[tuple[Connection, list[_Dust]]]:
        """One read transaction, and the counts it found worth compacting (``_Dust``), compacted
        after it ends (``_compact``): every read of this service takes this shape."""
        dust: list[_Dust] = []
        with self._store.read() as connection:
            yield connection, dust
        self._compact(dust)

    def _compact(self, dust: Sequence[_Dust]) -> None:
        """Merge the delta rows of the counts a read found dusty, each range in a transaction of its
        own after the read's (which may not write); it waits for no writer on PostgreSQL. A
        database that takes no writes now (a standby, an outage) leaves them to a later read: the
        reader has its answer already."""
        with contextlib.suppress(Unavailable):
            for found in dust:
                with self._store.write() as connection:
                    gaps.compact_ready_counts(connection, found.dataset_id, found.key_from, found.key_to)


def _grid(
    connection: Connection,
    namespace: str,
    target: _Target,
    span: TimeRange,
    chosen: Resolution | None,
    dust: list[_Dust],
    now: datetime.datetime,
    wanted: Interval | None = None,
    *,
    known: Interval | None = None,
) -> Grid:
    report = _report(connection, namespace, target, span, wanted, dust, now, known=known)[0]
    if report.interval is None:
        return lot_grid.build(report, (), chosen)  # refuses: named lots have no grid
    first, stop = span.indexes(report.interval)
    lots = (
        target.dataset_id,
        str(lot_from_index(first, report.interval)),
        str(lot_from_index(stop - 1, report.interval)),
        g.id_pattern(report.interval),
    )
    empty = gaps.empty_lots(connection, *lots)
    checked = gaps.checked_versions(connection, *lots)
    warned = [lot for lot, facets in checked if published_with_warnings(facets)]
    return lot_grid.build(report, empty, chosen, warned)


def _told(
    connection: Connection,
    namespace: str,
    target: _Target,
    lots: Sequence[str],
    known: Interval | None,
    dust: list[_Dust],
    now: datetime.datetime,
) -> tuple[GapReport, dict[str, lot_grid.CellState]]:
    """The report over the span of ``lots`` and each lot's word in it: the state of the report's
    run that holds it, else complete, or empty if its manifest lists nothing. The one mapping of a
    lot to the words every page and command uses."""
    interval = known if known is not None else _interval(connection, namespace, target, None)
    if interval is None:  # named lots: the rows that are not READY are the report's runs
        report = _named_report(connection, namespace, target, TimeRange(now, now))
        named = {run.first: lot_grid.FROM_GAP[run.state] for run in report.runs}
        return report, {lot: named.get(lot, lot_grid.CellState.COMPLETE) for lot in lots}
    windows = [w for w in map(parse_lot, lots) if isinstance(w, IntervalLot) and w.interval == interval]
    if len(windows) != len(lots):
        raise InvalidInput(f"{namespace}:{target.dataset} has {interval} lots, not {', '.join(lots[:3])}.")
    span = TimeRange(min(w.start for w in windows), max(w.end for w in windows))
    report, found = _report(connection, namespace, target, span, None, dust, now, known=interval)
    first, stop = span.indexes(interval)
    bounds = str(lot_from_index(first, interval)), str(lot_from_index(stop - 1, interval))
    empty = set(gaps.empty_lots(connection, target.dataset_id, *bounds, g.id_pattern(interval)))
    indexes = {lot: g.index_of(lot, interval) for lot in lots}
    held = g.states_at(found, indexes.values())
    states = {}
    for lot, index in indexes.items():
        if index in held:
            states[lot] = lot_grid.FROM_GAP[held[index]]
        else:
            states[lot] = lot_grid.CellState.EMPTY if lot in empty else lot_grid.CellState.COMPLETE
    return report, states


def _span(
    connection: Connection, namespace: str, target: _Target, known: Interval | None = None
) -> tuple[datetime.datetime, datetime.datetime] | None:
    """``GapService.span``; ``known``: the target's interval, when the caller has looked it up."""
    interval = known
    if interval is None:
        try:
            interval = _interval(connection, namespace, target, None)
        except InvalidInput:  # no mapping and no lots yet
            return None
    if interval is None:
        return None
    sources = [(target.dataset_id, interval)]
    if target.lot_job is not None:
        mapping = target.lot_job.mapping
        wanted = interval if mapping is None else mapping.input
        sources += [(dataset_id, wanted) for dataset_id in target.lot_job.inputs]
    found = [gaps.output_lot_bounds(connection, d, g.id_pattern(i)) for d, i in sources]
    windows = [parse_lot(lot) for bounds in found if bounds is not None for lot in bounds]
    lots = [w for w in windows if isinstance(w, IntervalLot)]
    if not lots:
        return None
    return min(w.start for w in lots), max(w.end for w in lots)


def _named_totals(report: GapReport) -> dict[lot_grid.CellState, int]:
    """A report of named lots (no grid) by the grid's states: every lot that exists."""
    return {lot_grid.FROM_GAP[s]: n for s, n in report.counts.items() if n}


def _health(
    connection: Connection,
    namespace: str,
    target: _Target,
    start: str | None,
    end: str | None,
    now: datetime.datetime,
    dust: list[_Dust],
) -> Health:
    held = target.lot_job is not None and target.lot_job.held
    try:
        interval = _interval(connection, namespace, target, None)
    except InvalidInput:  # no mapping and no lots yet
        return Health(namespace, target.job, target.dataset, held, None, {})
    if interval is None:  # named lots have no time range: every lot that exists
        report = _named_report(connection, namespace, target, TimeRange(now, now))
        return Health(namespace, target.job, target.dataset, held, None, _named_totals(report))
    span = _span(connection, namespace, target, interval)
    if span is None and (start is None or end is None):
        return Health(namespace, target.job, target.dataset, held, None, {})
    due = lot_grid.due_range(start, end, span, now)
    if due.empty:
        return Health(namespace, target.job, target.dataset, held, due, {})
    shown = TimeRange(due.start, due.end)
    per_day = lot_grid.day_resolution(interval)  # a health counts lots: a cell a day is enough
    grid = _grid(connection, namespace, target, shown, per_day, dust, now, known=interval)
    totals = {s: n for s, n in grid.totals().items() if n}
    warned = sum(cell.warned for cell in grid.cells)
    return Health(
        namespace,
        target.job,
        target.dataset,
        held,
        due,
        totals,
        warned,
        *_newest(connection, target, interval),
        outputs=_outputs(connection, namespace, target, shown, grid, dust, now),
    )


def _outputs(
    connection: Connection,
    namespace: str,
    target: _Target,
    shown: TimeRange,
    first: Grid,
    dust: list[_Dust],
    now: datetime.datetime,
) -> tuple[OutputHealth, ...]:
    """Each output of a job with several, over ``shown`` (``first``: the first output's grid,
    already read); nothing for a job with one output or a dataset."""
    lot_job = target.lot_job
    if target.job is None or lot_job is None or len(lot_job.outputs) < 2:
        return ()
    names = {key: ref.name for key, ref in datasets.dataset_refs(connection, list(lot_job.outputs)).items()}
    found = []
    for dataset_id in lot_job.outputs:
        grid = first
        if dataset_id != target.dataset_id:
            other = _Target(dataset_id, names[dataset_id], target.job, lot_job)
            resolution, interval = first.resolution, first.interval
            grid = _grid(connection, namespace, other, shown, resolution, dust, now, known=interval)
        totals = {s: n for s, n in grid.totals().items() if n}
        found.append(OutputHealth(names[dataset_id], totals, sum(cell.warned for cell in grid.cells)))
    return tuple(found)


def _newest(
    connection: Connection, target: _Target, interval: Interval
) -> tuple[str | None, datetime.datetime | None]:
    """The target's newest complete (or empty) lot and its end: its freshness."""
    newest = gaps.newest_ready_lot(connection, target.dataset_id, g.id_pattern(interval))
    return newest, None if newest is None else lot_from_index(
        g.index_of(newest, interval) + 1, interval
    ).start


def _namespace_targets(connection: Connection, namespace: str, limit: int) -> list[_Target]:
    """The namespace's coordinated jobs as report targets, producers before their consumers."""
    _common.require_namespace(connection, namespace)
    found = namespace_lot_jobs(connection, namespace, limit)
    ids = [job.output_dataset_id for _, job in found] + [i for _, job in found for i in job.inputs]
    names = {key: ref.name for key, ref in datasets.dataset_refs(connection, ids).items()}
    produces = {name: (names[job.output_dataset_id], [names[i] for i in job.inputs]) for name, job in found}
    order = {name: n for n, name in enumerate(lot_grid.dependency_order(produces))}
    return [
        _Target(job.output_dataset_id, names[job.output_dataset_id], name, job)
        for name, job in sorted(found, key=lambda pair: order[pair[0]])
    ]


def _iso(at: datetime.datetime) -> str:
    """An instant as ``parse_time`` reads it (and as a command line types it): ``2023-01-01T04:10:00Z``."""
    return at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _resolution(text: str) -> Resolution:
    try:
        return Resolution(text)
    except ValueError:
        allowed = ", ".join(r.value for r in Resolution)
        raise InvalidInput(f"resolution {text!r} is not one of {allowed}.") from None


def _arguments(start: str, end: str, interval: str | None) -> tuple[TimeRange, Interval | None]:
    return TimeRange.parse(start, end), None if interval is None else Interval.parse(interval)


def _range_of(
    connection: Connection,
    namespace: str,
    target: _Target,
    start: str | None,
    end: str | None,
    interval: str | None,
    now: datetime.datetime,
) -> tuple[TimeRange, Interval | None]:
    """``[start, end)`` as asked; what is left out: to now, from the first lot of the dataset or its
    producer's inputs (at most ``DEFAULT_SPAN`` back: a recent window, the rest reachable)."""
    wanted = None if interval is None else Interval.parse(interval)
    if start is not None and end is not None:
        return TimeRange.parse(start, end), wanted
    upto = g.parse_time("to", end) if end is not None else now
    if start is not None:
        return TimeRange.parse(start, upto.isoformat()), wanted
    looked_up = _interval(connection, namespace, target, wanted)
    span = None if looked_up is None else _span(connection, namespace, target, looked_up)
    if span is None:
        if looked_up is None:  # named lots have no window: the range only labels the report
            return TimeRange(upto - lot_grid.DEFAULT_SPAN, upto), wanted
        raise InvalidInput(
            f"{namespace}:{target.dataset} has no lots yet to count from: name --from (and --to)."
        )
    begin = max(span[0], upto - lot_grid.DEFAULT_SPAN)
    if begin >= upto:
        raise InvalidInput(
            f"the first lot of {namespace}:{target.dataset} starts at {span[0]:%Y-%m-%d %H:%M} UTC, "
            f"after {upto:%Y-%m-%d %H:%M} UTC: name --from."
        )
    return TimeRange(begin, upto), wanted


def _target(connection: Connection, namespace: str, job: str | None, dataset: str | None) -> _Target:
    if job is not None and dataset is None:
        return _job_target(connection, namespace, job)[0]
    if dataset is not None and job is None:
        return _dataset_target(connection, namespace, dataset)
    raise InvalidInput("Name either a job or a dataset.")


def _job_target(connection: Connection, namespace: str, job: str) -> tuple[_Target, LotJob]:
    _common.require_namespace(connection, namespace)
    lot_job = lot_job_named(connection, namespace, job)
    name = datasets.dataset_refs(connection, [lot_job.output_dataset_id])[lot_job.output_dataset_id].name
    return _Target(lot_job.output_dataset_id, name, job, lot_job), lot_job


def _dataset_target(connection: Connection, namespace: str, dataset: str) -> _Target:
    _common.require_namespace(connection, namespace)
    dataset_id = _common.require_dataset(connection, namespace, dataset)
    producer = registry.producer_of(connection, dataset_id)
    if producer is None:
        return _Target(dataset_id, dataset, None, None)
    label = registry.job_label(connection, producer).removeprefix(f"{namespace}:")
    return _Target(dataset_id, dataset, label, find_lot_job(connection, producer))


def _interval(
    connection: Connection, namespace: str, target: _Target, wanted: Interval | None
) -> Interval | None:
    """The dataset's lot interval (None: it has named lots). A mapping says it; an unmapped job's
    output has its first input's lots; a source's are told by ``wanted`` or by its lot ids."""
    dataset_id, lot_job = target.dataset_id, target.lot_job
    for _ in range(MAX_CHAIN):
        if lot_job is not None and lot_job.mapping is not None:
            if wanted is not None and wanted != lot_job.mapping.output:
                raise InvalidInput(
                    f"Dataset {namespace}:{target.dataset} has {lot_job.mapping.output} lots "
                    f"(its producer maps {lot_job.mapping}), not {wanted}."
                )
            return lot_job.mapping.output
        if lot_job is None or not lot_job.inputs:
            break
        dataset_id = lot_job.inputs[0]
        producer = registry.producer_of(connection, dataset_id)
        lot_job = None if producer is None else find_lot_job(connection, producer)
    if wanted is not None:
        return wanted
    last = gaps.last_output_lot(connection, dataset_id)
    if last is None:
        raise InvalidInput(
            f"Cannot tell the lot interval of {namespace}:{target.dataset}: no registered lot mapping "
            "and no lots yet; pass the interval (e.g. --interval PT5M)."
        )
    parsed = parse_lot(last)
    return parsed.interval if isinstance(parsed, IntervalLot) else None


def _report(
    connection: Connection,
    namespace: str,
    target: _Target,
    span: TimeRange,
    wanted: Interval | None,
    dust: list[_Dust],
    now: datetime.datetime,
    *,
    known: Interval | None = None,
) -> tuple[GapReport, list[Segment]]:
    """The report and its segments; ``known``: the target's interval when the caller has looked it
    up, ``wanted`` then being checked already (looking it up walks the chain of producers: a few
    reads per job)."""
    interval = known if known is not None else _interval(connection, namespace, target, wanted)
    if interval is None:
        return _named_report(connection, namespace, target, span), []
    first, stop = span.indexes(interval)
    found = _segments(connection, target.dataset_id, interval, first, stop, dust, explain=True)
    lot_job = target.lot_job
    if lot_job is not None and lot_job.held:
        found = g.hold_all(found)
    arrival = _arrival_of(connection, target)
    if target.dataset_id in arrival.empty_sources:
        found = g.awaiting_declaration(found, _watched_from(arrival, target.dataset_id, interval))
    waiting = any(s.state in (GapState.MISSING, GapState.FAILED) for s in found)
    if lot_job is not None and lot_job.inputs and waiting:
        found = g.block(found, _blockers(connection, lot_job, interval, first, stop, dust, arrival))
    found = g.settle(found, g.due_stop(now - arrival.late_after, interval))
    if lot_job is not None:
        found = g.mark_stale(found, _stale(connection, target.dataset_id, lot_job, interval, first, stop))
    report = GapReport(
        namespace,
        target.dataset,
        target.job,
        interval,
        span.start,
        span.end,
        stop - first,
        g.counts(found, stop - first),
        g.runs(found, interval),
    )
    return report, found


def _stale(
    connection: Connection, dataset_id: uuid.UUID, lot_job: LotJob, interval: Interval, first: int, stop: int
) -> dict[int, g.Made]:
    """The READY lots of ``[first, stop)`` that an older version of their job made, by index, each
    with that version's number and the current one's (none read when the job never changed)."""
    bounds = str(lot_from_index(first, interval)), str(lot_from_index(stop - 1, interval))
    found = _stale_lots(connection, dataset_id, lot_job, *bounds, g.id_pattern(interval))
    indexes = g.indexes_of([lot for lot, _ in found], interval)
    return {i: made for i, (_, made) in zip(indexes, found, strict=True)}


def _stale_lots(
    connection: Connection,
    dataset_id: uuid.UUID,
    lot_job: LotJob,
    lot_from: str | None = None,
    lot_to: str | None = None,
    pattern: str | None = None,
) -> list[tuple[str, g.Made]]:
    """The READY lots (in ``[lot_from, lot_to]``; all of them for named lots) that an older version
    of their job made, in lot order, with that version's number and the current one's."""
    versions = gaps.job_versions_of(connection, lot_job.job_id)
    if versions.current is None or not versions.older:
        return []
    now = versions.numbers.get(versions.current, len(versions.numbers))
    found = gaps.stale_lots(connection, dataset_id, versions.older, lot_from, lot_to, pattern)
    return [(lot, g.Made(versions.numbers[version], now)) for lot, version in found]


def _blockers(
    connection: Connection,
    lot_job: LotJob,
    interval: Interval,
    first: int,
    stop: int,
    dust: list[_Dust],
    arrival: _Arrival,
) -> list[Segment]:
    """Every input's lots that are not READY, as the output lots they hold back (a source input's
    lots that its ``absent=empty`` policy has yet to declare are pending)."""
    input_interval = interval if lot_job.mapping is None else lot_job.mapping.input
    low, high = covered_indexes(first, stop, input_interval, interval)
    names = datasets.dataset_refs(connection, list(lot_job.inputs))
    found: list[Segment] = []
    for dataset_id in lot_job.inputs:
        waiting = _segments(connection, dataset_id, input_interval, low, high, dust)
        if dataset_id in arrival.empty_sources:
            waiting = g.awaiting_declaration(waiting, _watched_from(arrival, dataset_id, input_interval))
        found += g.blockers(names[dataset_id].name, waiting, input_interval, interval)
    return found


@dataclass(frozen=True)
class _Arrival:
    """What the arrival policies of a target's sources say of its lots: the longest lateness window
    among them (a lot is due once its end plus it is past), and the sources that declare absence
    empty, each with where its arrival pass watches from."""

    late_after: datetime.timedelta
    empty_sources: dict[uuid.UUID, datetime.datetime | None]


def _watched_from(arrival: _Arrival, dataset_id: uuid.UUID, interval: Interval) -> int:
    """The index of the first lot of an ``absent=empty`` source that its arrival pass declares."""
    since = arrival.empty_sources[dataset_id]
    return lot_index(lot_at(since, interval)) if since is not None else 0


def _arrival_of(connection: Connection, target: _Target) -> _Arrival:
    """The sources the target's lots come from (itself, if it has no inputs), up the chain of
    producers, and their policies (the default for a source without one)."""
    sources: set[uuid.UUID] = set()
    seen: set[uuid.UUID] = set()
    todo = [(target.dataset_id, target.lot_job)]
    while todo and len(seen) < MAX_CHAIN * 8:
        dataset_id, lot_job = todo.pop()
        if dataset_id in seen:
            continue
        seen.add(dataset_id)
        if lot_job is None or not lot_job.inputs:
            sources.add(dataset_id)
            continue
        for input_id in lot_job.inputs:
            producer = registry.producer_of(connection, input_id)
            todo.append((input_id, None if producer is None else find_lot_job(connection, producer)))
    watches = {w.dataset_id: w for w in arrival.watches(connection, sorted(sources))}
    policies = [watches[d].policy if d in watches else DEFAULT_POLICY for d in sources]
    empty = {d: w.noticed_through for d, w in watches.items() if w.policy.absent is Absence.EMPTY}
    return _Arrival(max((p.late_after for p in policies), default=DEFAULT_POLICY.late_after), empty)


def _segments(
    connection: Connection,
    dataset_id: uuid.UUID,
    interval: Interval,
    first: int,
    stop: int,
    dust: list[_Dust],
    *,
    explain: bool = False,
) -> list[Segment]:
    """The dataset's lots ``[first, stop)`` that are not complete, from its rows in a few reads;
    ``explain``: failed lots with their attempt and reason (one more read, for all of them)."""
    lot_from, lot_to = str(lot_from_index(first, interval)), str(lot_from_index(stop - 1, interval))
    pattern = g.id_pattern(interval)
    ready, dusty = _ready_runs(connection, dataset_id, interval, first, stop)
    dust += [dusty] if dusty is not None else []
    unready = gaps.unready_rows(connection, dataset_id, lot_from, lot_to, pattern)
    other = {g.index_of(r.lot, interval): g.state_of(r.status) for r in unready}
    failures = (
        {
            g.index_of(lot, interval): failure
            for lot, failure in _failures(connection, dataset_id, unready).items()
        }
        if explain
        else None
    )
    return g.segments(first, stop, ready, other, failures)


def _ready_runs(
    connection: Connection, dataset_id: uuid.UUID, interval: Interval, first: int, stop: int
) -> tuple[list[tuple[int, int]], _Dust | None]:
    """The runs of READY lots of ``[first, stop)``: complete days and full tens from the counts,
    the rows of the tens that are neither full nor empty one by one (docs/lots.md); and the range
    of the counts when they are worth compacting."""
    if first >= stop:
        return [], None
    keys = (
        dataset_id,
        rc.count_key(first, interval),
        rc.count_key(stop - 1, interval),
        rc.count_pattern(interval),
        rc.day_length(interval),
        interval.windows_per_day,
    )
    found = gaps.ready_by_day(connection, *keys)
    dusty = (
        _Dust(dataset_id, keys[1], keys[2]) if found.rows - found.keys > max(found.keys, DUST_FLOOR) else None
    )
    counted = rc.from_counts(first, stop, interval, found.days, found.tens)
    read = gaps.ready_among(connection, dataset_id, list(counted.unsure))
    pieces = counted.ready + [(counted.unsure[lot], counted.unsure[lot] + 1) for lot in read]
    return rc.ready_runs(first, stop, pieces), dusty


def _failures(
    connection: Connection, dataset_id: uuid.UUID, rows: Sequence[gaps.UnreadyLot]
) -> dict[str, g.LastAttempt]:
    """Each failed lot's last attempt, its one-line reason and whether it was given up on, the
    reasons in one read and the lots given up on in another."""
    failed = [r for r in rows if g.state_of(r.status) is GapState.FAILED]
    reasons = runs.failure_reasons(connection, [r.run_id for r in failed if r.run_id is not None])
    given_up = frontier.given_up_in(connection, dataset_id, [r.lot for r in failed])
    known: dict[str, tuple[str | None, str | None]] = {
        r.lot: reasons.get(r.run_id, (None, None)) if r.run_id is not None else (None, None) for r in failed
    }
    return {
        r.lot: g.LastAttempt(r.attempt, known[r.lot][0], given_up.get(r.lot), known[r.lot][1]) for r in failed
    }


def _named_report(connection: Connection, namespace: str, target: _Target, span: TimeRange) -> GapReport:
    """A dataset of named lots: the rows that exist (a named lot has no window, so none is missing)."""
    held = target.lot_job is not None and target.lot_job.held
    listed = []
    rows = gaps.unready_rows(connection, target.dataset_id)
    failures = _failures(connection, target.dataset_id, rows)
    for row in rows:
        state = g.state_of(row.status)
        if held and state in (GapState.MISSING, GapState.FAILED):
            state = GapState.HELD
        listed.append(g.LotRun(state, row.lot, row.lot, 1, failure=failures.get(row.lot)))
    stale = [] if target.lot_job is None else _stale_lots(connection, target.dataset_id, target.lot_job)
    listed += [g.LotRun(GapState.STALE, lot, lot, 1, made=made) for lot, made in stale]
    listed.sort(key=lambda run: run.first)
    ready = gaps.count_ready(connection, target.dataset_id)
    tally = dict.fromkeys(g.STATES, 0)
    for run in listed:
        tally[run.state] += 1
    tally[GapState.COMPLETE] = ready - len(stale)
    return GapReport(
        namespace,
        target.dataset,
        target.job,
        None,
        span.start,
        span.end,
        ready + len(listed) - len(stale),
        tally,
        listed,
    )
