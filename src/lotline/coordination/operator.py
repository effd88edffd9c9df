"""An operator's moves on lots: invalidate (with its cascade), hold and release, clean up."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from lotline.domain.coordination import CLAIMABLE_OUTPUT, ArcAction, ArcState, Status, arc_state, plan_arc
from lotline.domain.errors import Conflict
from lotline.store.queries import claims as q
from lotline.store.queries import datasets, frontier, versions


def arc_of(row: q.StatusRow | None) -> ArcState:
    """Arc state of the (job, lot) whose OUTPUT row this is (no row: missing)."""
    if row is None:
        return ArcState.MISSING
    held = Status(row.held_status) if row.held_status else None
    return arc_state(Status(row.status), held, row.data_removed_at is not None)


@dataclass
class Invalidation:
    """What one invalidation changed: reopened (dataset id, lot)s, and running claims it revoked."""

    reopened: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    revoked_runs: list[uuid.UUID] = field(default_factory=list)


def _to_reopen(row: q.StatusRow | None, lot: str, shown: str) -> bool:
    """Whether the lot whose OUTPUT row this is gets reopened: not if it already is (RESUBMIT);
    refused (Conflict) unless READY or held."""
    if row is not None and Status(row.status) is Status.RESUBMIT:
        return False
    current = arc_of(row)
    if row is None or Status(row.status) not in (Status.READY, Status.HOLD):
        detail = "has never been produced" if row is None else f"is {row.status}"
        raise Conflict(
            f"Lot {lot} of {shown} {detail}; only a READY lot can be invalidated.", current=current
        )
    plan_arc(current, ArcAction.REOPEN)
    return True


def invalidate(
    connection: Connection, dataset_id: uuid.UUID, lot: str, now: datetime, shown: str
) -> Invalidation:
    """Reopen a READY lot (RESUBMIT), release its producer's read locks, and cascade downstream.

    Every job that consumed the lot gets its output for the lot reopened the same way,
    transitively; a consumer still running on the lot loses its claim (OUTPUT/INPUT ERROR, run
    failed) because it is reading data that is no longer valid. A job's outputs are produced
    together: reopening one output's lot reopens the same lot of the job's other outputs (and
    their consumers). Reopening an already reopened lot changes nothing.
    """
    row = q.output_row(connection, dataset_id, lot)
    if not _to_reopen(row, lot, shown) or row is None:
        return Invalidation()
    done = Invalidation()
    queue = deque([(dataset_id, lot, row.job_id, row.run_id)])
    while queue:
        d, lot_, job_id, run_id = queue.popleft()
        if (d, lot_) in done.reopened:
            continue
        if q.set_output_status(connection, d, lot_, expected=Status.READY, status=Status.RESUBMIT, now=now):
            frontier.raise_for_job(connection, job_id, [lot_], now)
        else:
            q.reopen_held(connection, d, lot_, now)  # its release will hint the producer
        q.set_claim_inputs(connection, job_id, run_id, Status.ERROR, now)
        versions.supersede_current(connection, d, lot_)
        done.reopened.append((d, lot_))
        for sibling in q.outputs_of_job_lot(connection, job_id, lot_):  # the job's other outputs
            if sibling.dataset_id != d and _readable(sibling):
                queue.append((sibling.dataset_id, lot_, job_id, sibling.run_id))
        for consumer in q.consuming_claims(connection, d, lot_):
            outputs = q.outputs_of_claim(connection, consumer.job_id, consumer.run_id)
            # OUTPUT rows before INPUT rows, as the reaper ends a claim: two orders could deadlock.
            queue.extend(_after_input_reopened(connection, consumer, outputs, now, done))
            q.set_claim_inputs(connection, consumer.job_id, consumer.run_id, Status.ERROR, now)
    return done


def _readable(row: q.StatusRow) -> bool:
    """READY, or held while READY: what invalidation reopens."""
    return Status(row.status) is Status.READY or (
        Status(row.status) is Status.HOLD and row.held_status == Status.READY.value
    )


def _after_input_reopened(
    connection: Connection,
    consumer: q.ConsumingClaim,
    outputs: Sequence[q.StatusRow],
    now: datetime,
    done: Invalidation,
) -> list[tuple[uuid.UUID, str, uuid.UUID, uuid.UUID | None]]:
    """A claim that read a reopened lot, by the OUTPUT rows it wrote: still running, it is revoked
    (ERROR, hinted); its outputs READY or held READY are reopened next (returned)."""
    if any(Status(output.status) is Status.RUNNING for output in outputs):
        q.fail_claim_outputs(connection, consumer.job_id, consumer.run_id, now)
        frontier.raise_for_job(connection, consumer.job_id, [outputs[0].lot], now)
        done.revoked_runs.append(consumer.run_id)
        return []
    return [(o.dataset_id, o.lot, consumer.job_id, consumer.run_id) for o in outputs if _readable(o)]


def _siblings(
    connection: Connection, level: Sequence[tuple[uuid.UUID, str, uuid.UUID, uuid.UUID | None]]
) -> list[tuple[uuid.UUID, str, uuid.UUID, uuid.UUID | None]]:
    """The other outputs of the claims that made this level's lots (a job's outputs are produced,
    and reopened, together), READY or held READY."""
    runs: dict[uuid.UUID, list[uuid.UUID]] = {}
    for _, _, job_id, run_id in level:
        if run_id is not None:
            runs.setdefault(job_id, []).append(run_id)
    found: list[tuple[uuid.UUID, str, uuid.UUID, uuid.UUID | None]] = []
    for job_id, run_ids in runs.items():
        for run_id, outputs in q.outputs_of_claims(connection, job_id, run_ids).items():
            found.extend((o.dataset_id, o.lot, job_id, run_id) for o in outputs if _readable(o))
    return found


def invalidate_many(
    connection: Connection, dataset_id: uuid.UUID, lots: Sequence[str], now: datetime, shown: str
) -> Invalidation:
    """``invalidate`` of many lots of one dataset in one transaction (a backfill's reopening), with
    the same outcome as invalidating them one after the other, but set-wise: the cascade goes level
    by level, each level's rows read and changed with a few statements per dataset instead of a few
    per lot. Lots already reopened are skipped; any other lot that is not READY (or held READY)
    refuses the whole call, changing nothing. A lot reached twice is reopened once."""
    rows = q.output_rows(connection, dataset_id, lots)
    level: list[tuple[uuid.UUID, str, uuid.UUID, uuid.UUID | None]] = []
    for lot in dict.fromkeys(lots):
        row = rows.get(lot)
        if not _to_reopen(row, lot, shown) or row is None:
            continue
        level.append((dataset_id, lot, row.job_id, row.run_id))
    done = Invalidation()
    seen: set[tuple[uuid.UUID, str]] = set()
    errored: set[tuple[uuid.UUID, uuid.UUID | None]] = set()
    first = True
    while level:
        level = [item for item in level if (item[0], item[1]) not in seen]
        seen.update((d, lot) for d, lot, _, _ in level)
        following = _reopen_level(connection, level, now, done, errored)
        if first:  # later levels come from claims whose outputs were all read: their own siblings
            following += _siblings(connection, level)
            first = False
        level = following
    return done


def _reopen_level(
    connection: Connection,
    level: list[tuple[uuid.UUID, str, uuid.UUID, uuid.UUID | None]],
    now: datetime,
    done: Invalidation,
    errored: set[tuple[uuid.UUID, uuid.UUID | None]],
) -> list[tuple[uuid.UUID, str, uuid.UUID, uuid.UUID | None]]:
    """Reopen one level of the cascade (as ``invalidate``'s loop body, for each item): the next
    level, the outputs made from these lots that are READY or held READY.
    ``errored``: the (job, run) claims whose INPUT rows were set to ERROR already (a consumer's
    are set when its input is reopened, the level before its outputs), not updated again."""
    by_dataset: dict[uuid.UUID, list[str]] = {}
    for d, lot, _, _ in level:
        by_dataset.setdefault(d, []).append(lot)
    following: list[tuple[uuid.UUID, str, uuid.UUID, uuid.UUID | None]] = []
    for d, lots in by_dataset.items():
        moved = q.reopen_ready_outputs(connection, d, lots, now)
        frontier.raise_for_reopened(connection, d, list(moved), now)
        held = [lot for lot in lots if lot not in moved]
        q.reopen_held_outputs(connection, d, held, now)  # their release will hint the producer
        versions.supersede_current_many(connection, d, lots)
        consumers = q.consuming_claims_of(connection, d, lots)
        outputs = q.outputs_of_consumers(connection, d, lots)
        for _, consumer in consumers:
            claim_outputs = outputs.get((consumer.job_id, consumer.run_id), [])
            following.extend(_after_input_reopened(connection, consumer, claim_outputs, now, done))
        # OUTPUT rows before INPUT rows, as the reaper ends a claim: two orders could deadlock.
        _set_inputs_error(connection, [(c.job_id, c.run_id) for _, c in consumers], now, errored)
    _set_inputs_error(connection, [(job_id, run_id) for _, _, job_id, run_id in level], now, errored)
    done.reopened.extend((d, lot) for d, lot, _, _ in level)
    return following


def _set_inputs_error(
    connection: Connection,
    claims: Sequence[tuple[uuid.UUID, uuid.UUID | None]],
    now: datetime,
    errored: set[tuple[uuid.UUID, uuid.UUID | None]],
) -> None:
    """The INPUT rows of these claims to ERROR, but for the claims in ``errored`` (then added)."""
    todo = [claim for claim in dict.fromkeys(claims) if claim not in errored]
    q.set_many_claim_inputs(connection, todo, Status.ERROR, now)
    errored.update(todo)


def hold_lot(
    connection: Connection, dataset_id: uuid.UUID, lot: str, producer: uuid.UUID, now: datetime
) -> bool:
    """Pause a lot: nobody produces or reads it until released. False if it was already held."""
    row = q.output_row(connection, dataset_id, lot)
    if row is None:
        q.insert_hold(connection, dataset_id, lot, producer, now)
        return True
    status = Status(row.status)
    if status is Status.HOLD:
        return False
    if status is Status.RUNNING:
        raise Conflict(
            f"Lot {lot} is being produced (attempt {row.attempt}); "
            "hold it when the claim ends, or hold the job.",
            current=status.value,
        )
    q.set_output_status(
        connection, dataset_id, lot, expected=status, status=Status.HOLD, held_status=status, now=now
    )
    return True


def release_lot(connection: Connection, dataset_id: uuid.UUID, lot: str, now: datetime) -> Status | None:
    """Undo a hold: back to the status it paused (None: the lot had no row and has none again)."""
    row = q.output_row(connection, dataset_id, lot)
    if row is None or Status(row.status) is not Status.HOLD:
        raise Conflict(f"Lot {lot} is not on hold.", current=None if row is None else row.status)
    if row.held_status is None:
        q.delete_output(connection, dataset_id, lot)
        frontier.raise_for_job(connection, row.job_id, [lot], now)
        return None
    restored = Status(row.held_status)
    q.set_output_status(connection, dataset_id, lot, expected=Status.HOLD, status=restored, now=now)
    if restored is Status.READY:
        datasets.lock_dataset(connection, dataset_id)  # see claims.announce: registration holds it too
        frontier.raise_for_consumers(connection, dataset_id, lot, now)
    elif restored in CLAIMABLE_OUTPUT:
        frontier.raise_for_job(connection, row.job_id, [lot], now)
    return restored


def clean(connection: Connection, outputs: Sequence[uuid.UUID], lot: str, now: datetime) -> None:
    """Record that a failed attempt's partial data was deleted: arc partial -> missing, for the
    job's first output (whose arc must allow it) and its other outputs alike."""
    plan_arc(arc_of(q.output_row(connection, outputs[0], lot)), ArcAction.CLEAN)
    for dataset_id in outputs:
        q.mark_data_removed(connection, dataset_id, lot, now)


def is_held(connection: Connection, dataset_id: uuid.UUID, lot: str) -> bool:
    row = q.output_row(connection, dataset_id, lot)
    return row is not None and Status(row.status) is Status.HOLD
