"""``lotline status | invalidate | hold | release | retry``: the operator's view and moves on lots
(SPEC §4)."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from typing import Annotated, Any

import typer

from lotline.cli.context import Namespace, namespace_in, open_existing
from lotline.domain.coordination import LotStatus, Role
from lotline.domain.errors import InvalidInput
from lotline.domain.gaps import GapState, LotRun, run_json, without_rows
from lotline.domain.grid import HEALTH_ORDER, CellState, Health, covered
from lotline.services import Lineage
from lotline.services.ingest import ingest_job

#: The words of ``lotline status``: every page's (the gap report's states, empty told apart).
STATE_ORDER = [s.value for s in HEALTH_ORDER]


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    lines = [header, *rows]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _as_json(row: LotStatus, state: CellState) -> dict[str, Any]:
    return {
        "namespace": row.namespace,
        "dataset": row.dataset,
        "lot": row.lot,
        "job": row.job,
        "state": state.value,
        "status": row.status.value,
        "heldStatus": row.held_status.value if row.held_status else None,
        "arc": row.arc.value if row.arc else None,
        "attempt": row.attempt,
        "owner": row.owner,
        "leaseExpiresAt": row.lease_expires_at.isoformat() if row.lease_expires_at else None,
        "runId": str(row.run_id) if row.run_id else None,
        "lock": row.lock,
        "error": row.error,
        "gaveUpAfter": row.gave_up_after,
    }


def _states(text: str | None) -> frozenset[CellState]:
    """``--state failed,missing``: the words of every page; empty: all."""
    if text is None:
        return frozenset(CellState)
    chosen = set()
    for word in (w.strip() for w in text.split(",")):
        try:
            chosen.add(CellState(word))
        except ValueError:
            raise InvalidInput(f"--state {word!r} is not one of {', '.join(STATE_ORDER)}.") from None
    return frozenset(chosen)


def status(
    namespace: Namespace = None,
    job: Annotated[str | None, typer.Option(help="Only the lots this job produces.")] = None,
    dataset: Annotated[str | None, typer.Option(help="Only the lots of this dataset.")] = None,
    lots: Annotated[bool, typer.Option("--lots", help="List every lot, not only the counts.")] = False,
    state: Annotated[
        str | None,
        typer.Option(
            "--state", help=f"Only lots in these states, comma-separated ({', '.join(STATE_ORDER)})."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (counts and every lot).")] = False,
) -> None:
    """Lots by state (the words of the gap report and the web UI): how many lots of each job's
    output are in each state (and, with --lots, which)."""
    wanted = _states(state)
    with open_existing() as lineage:
        namespace = namespace_in(lineage, namespace)
        rows = lineage.lots.status(namespace, job=job, dataset=dataset)
        told: dict[tuple[str, str], CellState] = {}
        for name in sorted({r.dataset for r in rows}):
            found = lineage.gaps.lot_states(namespace, name, [r.lot for r in rows if r.dataset == name])
            told.update({(name, lot): word for lot, word in found.items()})
        now = lineage.clock.now()
        healths = [
            h
            for h in lineage.gaps.namespace_health(namespace, now=now)
            if h.range is not None
            and (job is None or h.job == job)
            and (dataset is None or h.dataset == dataset)
        ]
        unlisted = _unlisted(lineage, namespace, healths, rows, wanted) if lots or as_json else []
    rows = [r for r in rows if told[(r.dataset, r.lot)] in wanted]
    counts: Counter[tuple[str, str, str]] = Counter(
        (r.job, r.dataset, told[(r.dataset, r.lot)]) for r in rows
    )
    # A job's lots as the gap report and the start page count them, from the first up to now: lots
    # due with no row yet (pending, missing) included. Named lots (no range) are counted by row.
    for h in healths:
        for s in STATE_ORDER:
            counts[(h.job or "", h.dataset, s)] = (
                h.totals.get(CellState(s), 0) if CellState(s) in wanted else 0
            )
    pairs = sorted({(j, d) for j, d, s in counts if counts[(j, d, s)]})
    if as_json:
        summary = [
            {
                "job": j,
                "dataset": d,
                "counts": {s: counts[(j, d, s)] for s in STATE_ORDER if counts[(j, d, s)]},
            }
            for j, d in pairs
        ]
        freshness = [{"job": h.job, "dataset": h.dataset, **h.freshness_json(now)} for h in healths]
        document = {
            "namespace": namespace,
            "jobs": summary,
            "freshness": freshness,
            "lots": [_as_json(r, told[(r.dataset, r.lot)]) for r in rows],
            "lotsWithoutRow": [{"job": j, "dataset": d, **run_json(run)} for j, d, run in unlisted],
        }
        print(json.dumps(document, indent=2))
        return
    if not pairs:
        print(f"no lots in namespace {namespace}" + ("" if state is None else f" in state {state}"))
        return
    header = ["JOB", "DATASET", *(s.upper() for s in STATE_ORDER), "TOTAL"]
    body = [
        [
            j,
            d,
            *[str(counts[(j, d, s)]) for s in STATE_ORDER],
            str(sum(counts[(j, d, s)] for s in STATE_ORDER)),
        ]
        for j, d in pairs
    ]
    print(table(header, body))
    given_up: Counter[str] = Counter(r.job for r in rows if r.gave_up_after is not None)
    for name, count in sorted(given_up.items()):
        print(
            f"job {name}: {count} failed lot{'' if count == 1 else 's'} given up on "
            f"(`lotline retry {name}` retries them)"
        )
    if healths:
        print()
        _print_freshness(healths, now)
    if lots:
        print()
        _print_lots(rows, told, unlisted)


def _print_freshness(healths: list[Health], now: datetime.datetime) -> None:
    """Each job's freshness, under the range its counts cover (from the first lot, at most a year
    back, to now)."""
    counted = covered(h.range for h in healths)
    if counted is not None:
        print(f"freshness, of the lots {counted.label}:")
    else:
        print(f"freshness, to now, {now:%Y-%m-%d %H:%M} UTC:")
    print(
        table(
            ["JOB", "DATASET", "FRESHNESS"],
            [[h.job or "", h.dataset, h.freshness_line(now)] for h in healths],
        )
    )


def _print_lots(
    rows: list[LotStatus], told: dict[tuple[str, str], CellState], unlisted: list[tuple[str, str, LotRun]]
) -> None:
    """The lots that have a row, one a line; then those that have none, as the gap report's runs."""
    detail = [
        [
            r.dataset,
            r.lot,
            r.job,
            told[(r.dataset, r.lot)].value,
            str(r.attempt),
            r.owner or "",
            "; ".join(x for x in (r.gave_up, r.error) if x),
        ]
        for r in rows
    ]
    if detail:
        print(table(["DATASET", "LOT", "JOB", "STATE", "ATTEMPT", "OWNER", "REASON"], detail))
    if unlisted:
        if detail:
            print()
        print("lots with no row yet (never delivered or made, or not due), as `lotline gaps` lists them:")
        body = [[d, r.state.value, r.first, r.last, str(r.count), j, r.why] for j, d, r in unlisted]
        print(table(["DATASET", "STATE", "FROM", "TO", "COUNT", "JOB", "WAITING ON"], body))


#: The states of lots that may have no row: a listing of rows leaves them out.
_ROWLESS = (GapState.MISSING, GapState.BLOCKED, GapState.PENDING)


def _unlisted(
    lineage: Lineage,
    namespace: str,
    healths: list[Health],
    rows: list[LotStatus],
    wanted: frozenset[CellState],
) -> list[tuple[str, str, LotRun]]:
    """Each job's lots counted (its health's range) in ``wanted`` states that have no row, as runs
    of the gap report: the lots ``status --lots`` would otherwise count but not name."""
    if not any(CellState(s.value) in wanted for s in _ROWLESS):
        return []
    found = []
    for health in healths:
        if health.job is None or health.range is None or health.range.empty:
            continue
        at = (health.range.start.isoformat(), health.range.end.isoformat())
        report = lineage.gaps.report(namespace, job=health.job, start=at[0], end=at[1])
        if report.interval is None:
            continue
        present = [r.lot for r in rows if r.dataset == health.dataset]
        for run in report.runs:
            if run.state in _ROWLESS and CellState(run.state.value) in wanted:
                parts = without_rows(run, report.interval, present)
                found += [(health.job, health.dataset, part) for part in parts]
    return found


def invalidate(
    dataset: Annotated[str, typer.Argument(help="Dataset whose lot is invalid.")],
    lot: Annotated[str, typer.Argument(help="The lot id.")],
    namespace: Namespace = None,
) -> None:
    """Reopen a READY lot (RESUBMIT) and every lot made from it, transitively."""
    with open_existing() as lineage:
        namespace = namespace_in(lineage, namespace)
        reopened = lineage.lots.invalidate(namespace, dataset, lot)
        rows = lineage.lots.status_page(
            namespace, dataset=dataset, role=None, lot_from=lot, lot_to=lot, limit=10
        )
    if not reopened:
        print(f"{dataset} {lot} was already reopened; nothing changed")
    for ref in reopened:
        print(f"reopened {ref.name} {ref.lot}")
    if any(r.role is Role.OUTPUT and r.job == ingest_job(dataset) for r in rows.items):
        print(
            f"{dataset} {lot} is a source lot: only `lotline ingest -d {dataset} …` makes it again (a scan "
            "re-registers what the landing holds for it); until then it is missing, and what was computed "
            "from it waits for it (`lotline run` has nothing to do for those lots)."
        )


def _target(dataset: str | None, lot: str | None, job: str | None) -> tuple[str, str] | str:
    """What a command names: a lot (DATASET LOT) or a job (--job), exactly one of them."""
    if job is not None and dataset is None and lot is None:
        return job
    if job is None and dataset is not None and lot is not None:
        return dataset, lot
    raise InvalidInput("Name either DATASET LOT, or --job JOB.")


def hold(
    dataset: Annotated[str | None, typer.Argument(help="Dataset of the lot to hold.")] = None,
    lot: Annotated[str | None, typer.Argument(help="The lot id.")] = None,
    job: Annotated[str | None, typer.Option(help="Hold a whole job instead of one lot.")] = None,
    namespace: Namespace = None,
) -> None:
    """Pause a lot (nobody produces or reads it) or a whole job (no new claims) until released."""
    target = _target(dataset, lot, job)
    with open_existing() as lineage:
        namespace = namespace_in(lineage, namespace)
        if isinstance(target, str):
            changed = lineage.lots.hold_job(namespace, target)
            print(f"job {target} {'is now' if changed else 'was already'} on hold")
        else:
            changed = lineage.lots.hold_lot(namespace, *target)
            print(f"{' '.join(target)} {'is now' if changed else 'was already'} on hold")


def release(
    dataset: Annotated[str | None, typer.Argument(help="Dataset of the held lot.")] = None,
    lot: Annotated[str | None, typer.Argument(help="The lot id.")] = None,
    job: Annotated[str | None, typer.Option(help="Release a whole job.")] = None,
    namespace: Namespace = None,
) -> None:
    """End a hold on a lot (back to the status it paused) or on a job."""
    target = _target(dataset, lot, job)
    with open_existing() as lineage:
        namespace = namespace_in(lineage, namespace)
        if isinstance(target, str):
            lineage.lots.release_job(namespace, target)
            print(f"job {target} released")
        else:
            restored = lineage.lots.release_lot(namespace, *target)
            word = lineage.gaps.lot_states(namespace, target[0], [target[1]])[target[1]].value
            print(f"{' '.join(target)} released ({word if restored else 'never produced'})")


def retry(
    job: Annotated[str, typer.Argument(help="The job whose failed lots to retry.")],
    lots: Annotated[
        list[str] | None, typer.Argument(help="Only these lots (default: every failed lot).")
    ] = None,
    namespace: Namespace = None,
) -> None:
    """Retry a job's failed lots now — those given up on after too many failed attempts
    (LOTLINE_MAX_ATTEMPTS) and those waiting out their back-off — with their count of failures back
    to 0; a worker or `lotline run` takes them next."""
    with open_existing() as lineage:
        namespace = namespace_in(lineage, namespace)
        count = lineage.lots.retry(namespace, job, lots)
    print(f"job {job}: {count} failed lot{'' if count == 1 else 's'} to be retried")
