"""Claiming a (job, lot), keeping it alive, and ending it — each fenced against lost races.

A claim is one transaction: take the job's next hints from its work list (``lot_frontier``), read
everything eligibility depends on in one query, then write OUTPUT RUNNING and the INPUT RUNNING
read locks in one conditional upsert that only one worker can win. The search never looks at lots
the job has already done, so it costs the same whatever the job's history.
"""

from __future__ import annotations

import uuid
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from lotline.coordination.registry import LotJob
from lotline.domain.coordination import (
    CLAIMABLE_OUTPUT,
    DEFAULT_MAX_ATTEMPTS,
    GAVE_UP,
    INPUT_LOCKED,
    Role,
    Status,
    retry_delay,
)
from lotline.domain.errors import Conflict
from lotline.store.queries import claims as q
from lotline.store.queries import datasets, frontier

#: Hints a mapped job takes at a time (twelve PT5M input lots make one PT1H output lot).
MAPPED_BATCH = 16
#: While hints lead to no eligible lot, each round takes twice as many, up to this.
MAX_BATCH = 256


@dataclass(frozen=True)
class Candidate:
    """An eligible output lot, the input lots (dataset id, lot) that make it up, and the attempt."""

    lot: str
    inputs: tuple[tuple[uuid.UUID, str], ...]
    #: The claim's attempt number: the output row's attempt + 1 (1 for a lot never claimed).
    attempt: int
    #: Failures in a row that this claim retries (the count of the retry hint it was found by).
    failures: int = 0


def input_lots(lot_job: LotJob, lot: str) -> tuple[tuple[uuid.UUID, str], ...]:
    lots = [lot] if lot_job.mapping is None else lot_job.mapping.input_lots(lot)
    return tuple((d, input_lot) for d in lot_job.inputs for input_lot in lots)


@dataclass(frozen=True)
class _Blocker:
    """Why (job, lot) is not eligible: its ``output`` row, an ``input`` lot not READY, or a ``lock``."""

    kind: str
    dataset_id: uuid.UUID
    lot: str
    row: Any


class _Rows:
    """The rows eligibility depends on, from one read (``q.claim_rows``)."""

    def __init__(self, connection: Connection, lot_job: LotJob, lots: Sequence[str]) -> None:
        self.lot_job = lot_job
        self.inputs = {lot: input_lots(lot_job, lot) for lot in lots}
        wanted = set(lots) | {input_lot for pairs in self.inputs.values() for _, input_lot in pairs}
        rows = q.claim_rows(
            connection, lot_job.job_id, [*lot_job.inputs, *lot_job.all_outputs], sorted(wanted)
        )
        self.outputs = {(r.dataset_id, r.lot): r for r in rows if r.role == Role.OUTPUT.value}
        self.locks = {(r.dataset_id, r.lot): r for r in rows if r.role == Role.INPUT.value}

    def blocker(self, lot: str) -> _Blocker | None:
        """SPEC §4 "Eligible", checked in the order the reasons are reported."""
        lot_job = self.lot_job
        for output_id in lot_job.all_outputs:  # a job's outputs move together; each is checked
            output = self.outputs.get((output_id, lot))
            if output is not None and Status(output.status) not in CLAIMABLE_OUTPUT:
                return _Blocker("output", output_id, lot, output)
        for dataset_id in lot_job.inputs:
            lots = [input_lot for d, input_lot in self.inputs[lot] if d == dataset_id]
            for input_lot in lots:
                produced = self.outputs.get((dataset_id, input_lot))
                if produced is None or produced.status != Status.READY.value:
                    return _Blocker("input", dataset_id, input_lot, produced)
            for input_lot in lots:
                lock = self.locks.get((dataset_id, input_lot))
                if lock is not None and Status(lock.status) in INPUT_LOCKED:
                    return _Blocker("lock", dataset_id, input_lot, lock)
        return None

    def candidate(self, lot: str, failures: int = 0) -> Candidate:
        output = self.outputs.get((self.lot_job.output_dataset_id, lot))
        return Candidate(lot, self.inputs[lot], 1 if output is None else output.attempt + 1, failures)


def _label(connection: Connection, dataset_id: uuid.UUID) -> str:
    ref = datasets.dataset_refs(connection, [dataset_id])[dataset_id]
    return f"{ref.namespace}:{ref.name}"


def _reason(connection: Connection, blocker: _Blocker) -> str:
    shown = _label(connection, blocker.dataset_id)
    row = blocker.row
    if blocker.kind == "output":
        state = Status(row.status)
        detail = {
            Status.RUNNING: f"is being produced (attempt {row.attempt} by {row.owner})",
            Status.READY: "is already READY; invalidate it to produce it again",
            Status.HOLD: "is on HOLD; release it first",
        }.get(state, f"is {state.value}")
        return f"output {shown} lot {blocker.lot} {detail}."
    if blocker.kind == "input":
        found = "not produced" if row is None else row.status
        return f"input {shown} lot {blocker.lot} is {found}, not READY."
    return f"this job already holds input {shown} lot {blocker.lot} (RUNNING or DONE)."


def named_candidate(connection: Connection, lot_job: LotJob, lot: str) -> Candidate:
    rows = _Rows(connection, lot_job, [lot])
    blocker = rows.blocker(lot)
    if blocker is not None:
        raise Conflict(f"Lot {lot} is not eligible: {_reason(connection, blocker)}")
    candidate = rows.candidate(lot)
    if lot_job.inputs:
        frontier.drop(connection, lot_job.job_id, [lot, *{input_lot for _, input_lot in candidate.inputs}])
    return candidate


def _hinted(lot_job: LotJob, hints: Mapping[str, int]) -> dict[str, int]:
    """The output lots that hints stand for, in hint order, each once, with the failures in a row
    they retry: a retry only if every hint of the lot is one (a new input lot is not a retry)."""
    if lot_job.mapping is None:
        return dict(hints)
    found: dict[str, int] = {}
    for hint, failures in hints.items():
        lot = lot_job.mapping.hinted_lot(hint)
        if lot is not None:
            found[lot] = min(found.get(lot, failures), failures)
    return found


def eligible_now(connection: Connection, lot_job: LotJob, limit: int) -> int | None:
    """Read only: how many lots the job's first ``limit`` hints stand for are eligible now (None:
    there are more hints than that and none of the first is, so it cannot tell)."""
    if lot_job.held or not lot_job.inputs:
        return 0
    hints = frontier.hints(connection, lot_job.job_id, limit)
    lots = list(_hinted(lot_job, dict.fromkeys(hints, 0)))
    rows = _Rows(connection, lot_job, lots)
    eligible = sum(1 for lot in lots if rows.blocker(lot) is None)
    return None if eligible == 0 and len(hints) == limit else eligible


def next_candidate(
    connection: Connection,
    lot_job: LotJob,
    now: datetime,
    guard: frontier.Guard | None = None,
    *,
    skip: Container[str] = (),
) -> Candidate | None:
    """The first eligible lot that the job's work list points at, or None. Jobs without inputs
    take named lots only.

    Hints taken are deleted (in this transaction): a hint for a lot that is not eligible is gone
    until the event that could make the lot eligible raises it again (an input lot becoming READY,
    the job's output failing or being reopened). Eligible lots not chosen get their hint back, the
    ``skip`` ones too, once the search is over (so that it does not pop them again).
    With a ``guard`` (a cached ``lot_job``), None also means that the cache may be stale (see
    ``frontier.pop``).
    """
    if not lot_job.inputs:
        return None
    batch = 1 if lot_job.mapping is None else MAPPED_BATCH
    passed: dict[str, int] = {}
    chosen = None
    while hints := frontier.pop(connection, lot_job.job_id, batch, now, guard):
        lots = _hinted(lot_job, hints)
        rows = _Rows(connection, lot_job, list(lots))
        eligible = [lot for lot in lots if rows.blocker(lot) is None]
        passed |= {lot: lots[lot] for lot in eligible if lot in skip}
        eligible = [lot for lot in eligible if lot not in skip]
        if eligible:
            chosen = rows.candidate(eligible[0], lots[eligible[0]])
            passed |= {lot: lots[lot] for lot in eligible[1:]}
            if lot_job.mapping is not None:
                frontier.drop(connection, lot_job.job_id, [chosen.lot, *{lot for _, lot in chosen.inputs}])
            break
        if len(hints) < batch:
            break
        batch = min(2 * batch, MAX_BATCH)
    frontier.raise_for_job(connection, lot_job.job_id, passed, now)
    return chosen


def hold_rows(connection: Connection, lot_job: LotJob, candidate: Candidate) -> bool:
    """Lock the rows the claim of ``candidate`` depends on without waiting (``q.lock_claim_rows``,
    why: issue 39.19); False if another transaction is changing one (the caller rolls back)."""
    own = [(d, candidate.lot) for d in lot_job.all_outputs]
    return q.lock_claim_rows(connection, lot_job.job_id, [*own, *candidate.inputs], candidate.inputs)


def take(
    connection: Connection,
    lot_job: LotJob,
    candidate: Candidate,
    *,
    owner: str,
    run_id: uuid.UUID,
    lease_expires_at: datetime,
    now: datetime,
) -> bool:
    """Write the claim's rows; False if another worker won the lot (the caller must roll back)."""
    return q.take_claim(
        connection,
        job_id=lot_job.job_id,
        outputs=[(d, candidate.lot) for d in lot_job.all_outputs],
        inputs=candidate.inputs,
        attempt=candidate.attempt,
        owner=owner,
        run_id=run_id,
        lease_expires_at=lease_expires_at,
        now=now,
    )


@dataclass(frozen=True)
class Fence:
    """What a worker must present to touch its claim: the (job, output lot), owner and attempt."""

    job_id: uuid.UUID
    dataset_id: uuid.UUID
    lot: str
    owner: str
    attempt: int
    run_id: uuid.UUID


def not_live(fence: Fence, what: str) -> Conflict:
    return Conflict(
        f"Cannot {what} lot {fence.lot}: attempt {fence.attempt} of {fence.owner} is no longer a live claim "
        "(its lease expired or it was reaped, failed, invalidated or taken over).",
        current="not owned",
    )


def heartbeat(connection: Connection, fence: Fence, lease_expires_at: datetime, now: datetime) -> None:
    if not q.extend_lease(
        connection,
        dataset_id=fence.dataset_id,
        lot=fence.lot,
        job_id=fence.job_id,
        owner=fence.owner,
        attempt=fence.attempt,
        run_id=fence.run_id,
        lease_expires_at=lease_expires_at,
        now=now,
    ):
        raise not_live(fence, "heartbeat")


def finish(connection: Connection, fence: Fence, *, success: bool, now: datetime) -> None:
    """Success: OUTPUT READY, INPUTs DONE. Failure: OUTPUT ERROR, INPUTs ERROR. Fenced: a Conflict
    (raised inside the caller's transaction, which it rolls back) if the claim is no longer live."""
    output, inputs = (Status.READY, Status.DONE) if success else (Status.ERROR, Status.ERROR)
    if not q.finish_claim(
        connection,
        job_id=fence.job_id,
        run_id=fence.run_id,
        owner=fence.owner,
        attempt=fence.attempt,
        output=output,
        inputs=inputs,
        now=now,
    ):
        raise not_live(fence, "complete" if success else "fail")


def announce(
    connection: Connection,
    fence: Fence,
    *,
    success: bool,
    now: datetime,
    failures: int = 0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> datetime | None:
    """Hint whoever may now take work: on success the lot's consumers; on failure the job itself,
    with a retry hint that no worker takes before the back-off of ``failures`` (the lot's failures
    in a row, this one included) has run out — or, after ``max_attempts`` failures in a row, never
    (``GAVE_UP``): the lot waits for a new input version, a new job version or an operator. Returns
    when the lot is retried (failure only; ``GAVE_UP``: not by itself).

    Call it after the run's output version was minted: minting locks the output dataset's row,
    which registration also locks before it fills a new consumer's work list, so a consumer
    registered meanwhile either sees the lot READY or is seen here.
    """
    if success:
        frontier.raise_for_consumers(connection, fence.dataset_id, fence.lot, now)
        return None
    retry_at = GAVE_UP if failures >= max_attempts else now + retry_delay(failures)
    frontier.raise_for_job(connection, fence.job_id, {fence.lot: failures}, now, not_before=retry_at)
    return retry_at


def reap(connection: Connection, now: datetime, limit: int = 100) -> list[q.StatusRow]:
    """Turn expired claims into ERROR (every OUTPUT row of the claim, and its INPUT rows: released);
    returns their OUTPUT rows as they were, one per output (a job with several outputs fails them
    together), whose runs the caller ends (whatever state those runs are in by now). A reaped lot
    is due again at once: its worker died, which is not the lot's fault (no back-off)."""
    expired = q.expired_claims(connection, now, limit)
    reaped: list[q.StatusRow] = []
    for row in expired:
        if row.run_id is None:
            if q.set_output_status(
                connection, row.dataset_id, row.lot, expected=Status.RUNNING, status=Status.ERROR, now=now
            ):
                reaped.append(row)
        else:
            moved = q.fail_claim_outputs(connection, row.job_id, row.run_id, now)
            reaped += [replace(row, dataset_id=d) for d in moved]
        q.set_claim_inputs(connection, row.job_id, row.run_id, Status.ERROR, now)
        frontier.raise_for_job(connection, row.job_id, [row.lot], now)
    return reaped


def unclaimed_runs(connection: Connection, run_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Those of ``run_ids`` that ``refuse_ending_claimed_run`` lets end, in one statement (a
    projection group's runs); the claims of the others stay locked until commit (PostgreSQL)."""
    return set(run_ids) - q.runs_with_claims(connection, run_ids)


def refuse_ending_claimed_run(connection: Connection, run_id: uuid.UUID, now: datetime) -> None:
    """A run that a claim owns ends with its claim (its worker completes or fails it; the reaper or
    an invalidation fails it), never from outside: ended from outside, its lot would stay RUNNING
    with an ended run. So does a child run of such a run (a part of its lot, which its worker ends).
    A lease that ran out does not free the run: until the reaper releases the lot, its worker may
    still be finishing, and a run completed from outside would get a version with no manifest and
    no data beside the reaper's FAILED lot (issue 39.13). A Conflict naming the claim (``now``
    tells whether its lease ran out); its row stays locked until commit (PostgreSQL)."""
    claim = q.claim_of_run(connection, run_id)
    if claim is not None:
        child = "" if claim.run_id == run_id else f" (a part of run {claim.run_id})"
        lease = f"lease until {claim.lease_expires_at.isoformat()}"
        if claim.lease_expires_at <= now:
            lease += " (run out: the reaper fails it next)"
        raise Conflict(
            f"Run {run_id}{child} belongs to a claim: job {claim.namespace}:{claim.job} "
            f"lot {claim.lot}, attempt {claim.attempt} of worker {claim.owner}, {lease}. It ends with "
            "its claim (its worker completes or fails it, or the reaper once the lease runs out); "
            "invalidate an input lot to stop it.",
            current="claimed",
        )
