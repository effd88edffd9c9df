"""Arrival policies and the arrival pass (SPEC §5 "Absence and freshness", docs/lots.md).

``ArrivalPolicies`` stores each source dataset's policy (declared by a pipeline file, ``lotline
ingest`` or lotline.toml) and reads it back. ``ArrivalPass`` notices the source lots that became
due since it last looked: a lot with nothing delivered gets one OVERDUE lot event when its policy
says ``missing``, and is declared empty by the policy when it says ``empty``. The pass is cheap (one
read of the policies, one of the lots delivered, one write), so every long-running process runs
it: ``lotline worker`` and ``lotline serve`` once a minute, ``lotline run`` and ``lotline ingest``
once, and ``lotline overdue`` for a scheduler.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection

from lotline.domain.arrival import DEFAULT_POLICY, Absence, ArrivalPolicy
from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.errors import LotlineError
from lotline.domain.gaps import id_pattern
from lotline.domain.lots import Interval, IntervalLot, lot_at, lot_from_index, lot_index, parse_lot
from lotline.domain.manifests import LotEventKind
from lotline.services import _common
from lotline.store.engine import Store
from lotline.store.queries import arrival, datasets, gaps, lot_events

#: The most lots of one source a pass notices (a week of five-minute lots); the next pass goes on.
MAX_LOTS_PER_PASS = 2_016
#: How far back the first pass of an ``absent=missing`` source pushes OVERDUE events.
MISSING_LOOKBACK = datetime.timedelta(days=1)
#: ``IngestService.declare_empty`` as the pass calls it (namespace, dataset, lots, declared by):
#: the lots it declared.
DeclareEmpty = Callable[[str, str, Sequence[str], str], list[str]]


@dataclass(frozen=True)
class DeclaredPolicy:
    """A source's policy as the API shows it: the policy, its lot interval and where it was declared."""

    policy: ArrivalPolicy
    interval: str
    declared_in: str

    def to_json(self) -> dict[str, str]:
        return {**self.policy.to_json(), "interval": self.interval, "declaredIn": self.declared_in}


_log = logging.getLogger(__name__)


class ArrivalPolicies:
    def __init__(self, store: Store, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._clock = clock

    def declare(
        self,
        namespace: str,
        dataset: str,
        interval: Interval,
        *,
        late_after: datetime.timedelta | None = None,
        absent: Absence | None = None,
        declared_in: str,
        now: datetime.datetime | None = None,
    ) -> ArrivalPolicy:
        """Store the dataset's policy: the parts given replace the stored ones (or the defaults).
        The pass starts a new watch at the dataset's first lot (``_watch_start``)."""
        now = now or self._clock.now()
        with self._store.write() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            found = arrival.watches(connection, [dataset_id])
            stored = found[0].policy if found else DEFAULT_POLICY
            policy = ArrivalPolicy(
                stored.late_after if late_after is None else late_after,
                stored.absent if absent is None else absent,
            )
            unchanged = found and found[0].policy == policy and found[0].interval == str(interval)
            if unchanged and ((late_after is None and absent is None) or found[0].declared_in == declared_in):
                return policy
            given = late_after is not None or absent is not None or not found
            where = declared_in if given else found[0].declared_in
            arrival.declare(connection, dataset_id, str(interval), policy, where, now)
        return policy

    def of(self, namespace: str, dataset: str) -> DeclaredPolicy | None:
        """The dataset's stored policy (None: it has none; a source then has the default)."""
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            found = arrival.watches(connection, [dataset_id])
        return None if not found else DeclaredPolicy(found[0].policy, found[0].interval, found[0].declared_in)


def _watch_start(
    connection: Connection, watch: arrival.Watch, interval: Interval, now: datetime.datetime
) -> datetime.datetime | None:
    """Where the pass starts a watch (None: the dataset has no lots yet, nothing to start from). An
    ``absent=empty`` source is declared from its first lot on, so that every interval of it is
    settled; an ``absent=missing`` one pushes OVERDUE events from its first lot but at most
    ``MISSING_LOOKBACK`` back (older missing lots are reported by gaps, not pushed one by one)."""
    bounds = gaps.output_lot_bounds(connection, watch.dataset_id, id_pattern(interval))
    first = None if bounds is None else parse_lot(bounds[0])
    if not isinstance(first, IntervalLot):
        return None
    if watch.policy.absent is Absence.EMPTY:
        return first.start
    return max(first.start, watch.policy.due_until(now) - MISSING_LOOKBACK)


@dataclass
class Noticed:
    """What one pass did: OVERDUE events pushed, lots declared empty by their policy, per dataset."""

    overdue: list[tuple[str, str, str]] = field(default_factory=list)
    declared_empty: list[tuple[str, str, str]] = field(default_factory=list)
    watched: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "watched": self.watched,
            "overdue": [{"namespace": n, "dataset": d, "lot": lot} for n, d, lot in self.overdue],
            "declaredEmpty": [
                {"namespace": n, "dataset": d, "lot": lot} for n, d, lot in self.declared_empty
            ],
        }


class ArrivalPass:
    """Notices the lots that became due since the last pass (module docstring)."""

    def __init__(self, store: Store, declare_empty: DeclareEmpty, clock: Clock = SYSTEM_CLOCK) -> None:
        self._store = store
        self._declare_empty = declare_empty
        self._clock = clock

    def notice(self, now: datetime.datetime | None = None) -> Noticed:
        """One pass. ``absent=empty`` sources first: their due lots with nothing delivered are
        declared empty (through ingest's claims: two passes at once declare each lot once). Then,
        in one transaction under the pass's lock, the ``absent=missing`` ones: lots still
        undelivered get their OVERDUE event and every watch that no other pass moved meanwhile
        moves on, so a lot is pushed once however many processes run passes."""
        now = now or self._clock.now()
        with self._store.read() as connection:
            watches = arrival.watches(connection)
            due = _due(connection, watches, now)
            refs = datasets.dataset_refs(connection, [w.dataset_id for w in watches if due[w.dataset_id]])
            empty = [w for w in watches if w.policy.absent is Absence.EMPTY and due[w.dataset_id]]
            pairs = [(w.dataset_id, str(lot)) for w in empty for lot in due[w.dataset_id]]
            delivered = arrival.delivered(connection, pairs) if pairs else set()
        done = Noticed(watched=len(watches))
        settled = {w.dataset_id for w in watches if due[w.dataset_id]}
        for watch in empty:
            ref = refs[watch.dataset_id]
            absent = [
                str(lot) for lot in due[watch.dataset_id] if (watch.dataset_id, str(lot)) not in delivered
            ]
            if not absent:
                continue
            try:
                declared = self._declare_empty(ref.namespace, ref.name, absent, watch.policy.declaration)
            except LotlineError as error:  # e.g. the dataset has another producer: the next pass retries
                _log.warning("arrival pass: %s:%s: %s", ref.namespace, ref.name, error)
                settled.discard(watch.dataset_id)
                continue
            done.declared_empty += [(ref.namespace, ref.name, lot) for lot in declared]
        if not settled:
            return done
        with self._store.write() as connection:
            arrival.lock_pass(connection)
            now_stored = {
                w.dataset_id: w.noticed_through for w in arrival.watches(connection, sorted(settled))
            }
            moving = [
                w
                for w in watches
                if w.dataset_id in settled
                and now_stored.get(w.dataset_id, w.noticed_through) == w.noticed_through
            ]
            missing = [w for w in moving if w.policy.absent is Absence.MISSING]
            pairs = [(w.dataset_id, str(lot)) for w in missing for lot in due[w.dataset_id]]
            there = arrival.delivered(connection, pairs) if pairs else set()
            overdue = [pair for pair in pairs if pair not in there]
            arrival.set_noticed(connection, [(w.dataset_id, due[w.dataset_id][-1].end) for w in moving])
            lot_events.append(
                connection, LotEventKind.OVERDUE, [(d, lot, None, None, None) for d, lot in overdue], now
            )
        done.overdue = [(refs[d].namespace, refs[d].name, lot) for d, lot in overdue]
        return done


def _due(
    connection: Connection, watches: Sequence[arrival.Watch], now: datetime.datetime
) -> dict[uuid.UUID, list[IntervalLot]]:
    """Each watch's lots that fell due since it last noticed (a new watch: since its start)."""
    found = {}
    for watch in watches:
        since = watch.noticed_through
        if since is None:
            since = _watch_start(connection, watch, Interval.parse(watch.interval), now)
        found[watch.dataset_id] = _due_lots(watch, since, now)
    return found


def _due_lots(
    watch: arrival.Watch, since: datetime.datetime | None, now: datetime.datetime
) -> list[IntervalLot]:
    """The watch's lots that end after ``since`` and are due now (at most ``MAX_LOTS_PER_PASS``,
    oldest first); none before the watch has a start."""
    interval = Interval.parse(watch.interval)
    until = watch.policy.due_until(now)
    if since is None or until <= since:
        return []
    found: list[IntervalLot] = []
    index = lot_index(lot_at(since, interval))  # the first lot that ends after ``since``
    while len(found) < MAX_LOTS_PER_PASS:
        lot = lot_from_index(index, interval)
        if lot.end > until:
            break
        found.append(lot)
        index += 1
    return found
