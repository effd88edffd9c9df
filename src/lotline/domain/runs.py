"""The run state machine of SPEC §2, as a table the rest of the code consults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lotline.domain.errors import Conflict


class RunState(StrEnum):
    NEW = "NEW"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


class RunAction(StrEnum):
    START = "start"
    COMPLETE = "complete"
    FAIL = "fail"
    ABORT = "abort"


TERMINAL_STATES = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.ABORTED})

#: (from state, action) -> to state. Anything absent is illegal.
TRANSITIONS: dict[tuple[RunState, RunAction], RunState] = {
    (RunState.NEW, RunAction.START): RunState.RUNNING,
    (RunState.NEW, RunAction.ABORT): RunState.ABORTED,
    (RunState.RUNNING, RunAction.COMPLETE): RunState.COMPLETED,
    (RunState.RUNNING, RunAction.FAIL): RunState.FAILED,
    (RunState.RUNNING, RunAction.ABORT): RunState.ABORTED,
}

#: The action whose repetition is an idempotent no-op in each state it leads to.
_PRODUCED_BY: dict[RunState, RunAction] = {
    RunState.RUNNING: RunAction.START,
    RunState.COMPLETED: RunAction.COMPLETE,
    RunState.FAILED: RunAction.FAIL,
    RunState.ABORTED: RunAction.ABORT,
}


@dataclass(frozen=True)
class TransitionPlan:
    """What applying ``action`` to a run in ``current`` does: move to ``target``, or nothing."""

    current: RunState
    target: RunState
    changes: bool


def allowed_actions(state: RunState) -> tuple[RunAction, ...]:
    return tuple(action for (source, action) in TRANSITIONS if source == state)


def plan_transition(current: RunState, action: RunAction) -> TransitionPlan:
    """Decide a transition; raise :class:`Conflict` naming the state and allowed actions if illegal."""
    target = TRANSITIONS.get((current, action))
    if target is not None:
        return TransitionPlan(current, target, changes=True)
    if _PRODUCED_BY.get(current) == action:
        return TransitionPlan(current, current, changes=False)
    allowed = [a.value for a in allowed_actions(current)]
    allowed_text = ", ".join(allowed) if allowed else "none (the run has ended)"
    raise Conflict(
        f"Cannot {action.value} a run that is {current.value}; allowed actions: {allowed_text}.",
        current=current.value,
        allowed=allowed,
    )


#: The run facet holding what a lot's transform logged (``lot.log``): ``{lines, dropped}``, the
#: last lines kept (spark/runlog.py); read by ``lotline logs`` and the web UI's run page.
LOG_FACET = "lotline_log"


def listed_facets(facets: Mapping[str, Any]) -> dict[str, Any]:
    """A run's facets as a list of runs shows them (issue 39.17): without what may weigh megabytes —
    ``lotline_log`` (what the lot's transform logged) and ``errorMessage``'s ``stackTrace`` (its
    message stays). The run itself (``GET /jobs/runs/{id}``) keeps them."""
    listed = {name: value for name, value in facets.items() if name != LOG_FACET}
    error = listed.get("errorMessage")
    if isinstance(error, Mapping) and "stackTrace" in error:
        listed["errorMessage"] = {key: value for key, value in error.items() if key != "stackTrace"}
    return listed
