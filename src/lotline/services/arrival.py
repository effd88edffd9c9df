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
from lotline.domain.lots import Interval, IntervalLot, lot_at, lot_from_index, lot_index
from lotline.domain.manifests import LotEventKind
from lotline.services import _common
from lotline.store.engine import Store
from lotline.store.queries import arrival, datasets, lot_events

#: The most lots of one source a pass notices (a week of five-minute lots); the next pass goes on.
MAX_LOTS_PER_PASS = 2_016
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
        """Store the dataset's policy: the parts given replace the stored ones (or the defaults). A
        new watch starts now: the pass applies the policy to the lots that fall due from now on;
        the lots due before are an ingest range's (which applies the policy too) or an operator's
        (``lotline ingest --empty``) to declare, and missing until then."""
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
            start = lot_at(policy.due_until(now), interval).start
            arrival.declare(connection, dataset_id, str(interval), policy, where, start, now)
        return policy

    def of(self, namespace: str, dataset: str) -> DeclaredPolicy | None:
        """The dataset's stored policy (None: it has none; a source then has the default)."""
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            found = arrival.watches(connection, [dataset_id])
        return None if not found else DeclaredPolicy(found[0].policy, found[0].interval, found[0].declared_in)


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
        self._warned: set[uuid.UUID] = set()

    def notice(self, now: datetime.datetime | None = None) -> Noticed:
        """One pass. ``absent=empty`` sources first: their due lots with nothing delivered are
        declared empty (through ingest's claims: two passes at once declare each lot once). Then,
        in one transaction under the pass's lock, every watch that no other pass moved meanwhile
        moves on, and the ``absent=missing`` ones' lots still undelivered get their OVERDUE
        event, so a lot is pushed once however many processes run passes. Watches that fell due
        alike (most: a pass per interval) are read and moved together: a few statements for ten
        thousand sources."""
        now = now or self._clock.now()
        with self._store.read() as connection:
            watches = arrival.watches(connection)
            due = _due(watches, now)
            refs = datasets.dataset_refs(connection, [w.dataset_id for w in watches if w.dataset_id in due])
            empty = [w for w in watches if w.policy.absent is Absence.EMPTY and w.dataset_id in due]
            delivered = _delivered(connection, empty, due)
        done = Noticed(watched=len(watches))
        failed: set[uuid.UUID] = set()
        for watch in empty:
            ref = refs[watch.dataset_id]
            absent = [lot for lot in due[watch.dataset_id].lots if (watch.dataset_id, lot) not in delivered]
            if not absent:
                continue
            try:
                declared = self._declare_empty(ref.namespace, ref.name, absent, watch.policy.declaration)
            except LotlineError as error:  # e.g. the dataset has another producer: the next pass retries
                level = logging.DEBUG if watch.dataset_id in self._warned else logging.WARNING
                self._warned.add(watch.dataset_id)  # said once per process, not every pass
                _log.log(level, "arrival pass: %s:%s: %s", ref.namespace, ref.name, error)
                failed.add(watch.dataset_id)
                continue
            done.declared_empty += [(ref.namespace, ref.name, lot) for lot in declared]
        alike: dict[tuple[datetime.datetime | None, datetime.datetime], list[uuid.UUID]] = {}
        for watch in watches:
            found = due.get(watch.dataset_id)
            if found is not None and watch.dataset_id not in failed:
                alike.setdefault((watch.noticed_through, found.through), []).append(watch.dataset_id)
        if not alike:
            return done
        with self._store.write() as connection:
            arrival.lock_pass(connection)
            moved: set[uuid.UUID] = set()
            for (since, through), ids in alike.items():
                moved |= arrival.move(connection, ids, since, through)
            missing = [w for w in watches if w.dataset_id in moved and w.policy.absent is Absence.MISSING]
            there = _delivered(connection, missing, due)
            overdue = [
                (w.dataset_id, lot)
                for w in missing
                for lot in due[w.dataset_id].lots
                if (w.dataset_id, lot) not in there
            ]
            lot_events.append(
                connection, LotEventKind.OVERDUE, [(d, lot, None, None, None) for d, lot in overdue], now
            )
        done.overdue = [(refs[d].namespace, refs[d].name, lot) for d, lot in overdue]
        return done


@dataclass(frozen=True)
class _Due:
    """A watch's lots that fell due since it last noticed (ids, oldest first), and the end of the
    last of them: where the watch moves to."""

    lots: tuple[str, ...]
    through: datetime.datetime


def _delivered(
    connection: Connection, watches: Sequence[arrival.Watch], due: dict[uuid.UUID, _Due]
) -> set[tuple[uuid.UUID, str]]:
    """Which due lots of ``watches`` have a row, one read per range of due lots."""
    ranges: dict[tuple[str, str], list[uuid.UUID]] = {}
    for watch in watches:
        lots = due[watch.dataset_id].lots
        ranges.setdefault((lots[0], lots[-1]), []).append(watch.dataset_id)
    found: set[tuple[uuid.UUID, str]] = set()
    for (first, last), ids in ranges.items():
        found |= arrival.delivered(connection, ids, first, last)
    return found


def _due(watches: Sequence[arrival.Watch], now: datetime.datetime) -> dict[uuid.UUID, _Due]:
    """The watches that have lots due since they last noticed, each kind of watch (interval,
    lateness, last noticed) worked out once."""
    found: dict[uuid.UUID, _Due] = {}
    alike: dict[tuple[str, datetime.timedelta, datetime.datetime | None], _Due | None] = {}
    for watch in watches:
        since = watch.noticed_through
        key = (watch.interval, watch.policy.late_after, since)
        if key not in alike:
            lots = _due_lots(watch, since, now)
            alike[key] = _Due(tuple(str(lot) for lot in lots), lots[-1].end) if lots else None
        if (kind := alike[key]) is not None:
            found[watch.dataset_id] = kind
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
