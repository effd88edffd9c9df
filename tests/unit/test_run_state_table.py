"""SPEC §2 as a table: every (state, action) pair has exactly one expected outcome."""

from __future__ import annotations

import itertools

import pytest

from lotline.domain.errors import Conflict
from lotline.domain.runs import RunAction, RunState, allowed_actions, plan_transition

S, A = RunState, RunAction
MOVES = {
    (S.NEW, A.START): S.RUNNING,
    (S.NEW, A.ABORT): S.ABORTED,
    (S.RUNNING, A.COMPLETE): S.COMPLETED,
    (S.RUNNING, A.FAIL): S.FAILED,
    (S.RUNNING, A.ABORT): S.ABORTED,
}
NO_OPS = {(S.RUNNING, A.START), (S.COMPLETED, A.COMPLETE), (S.FAILED, A.FAIL), (S.ABORTED, A.ABORT)}


@pytest.mark.parametrize(("state", "action"), list(itertools.product(RunState, RunAction)))
def test_every_state_and_action(state: RunState, action: RunAction) -> None:
    if (state, action) in MOVES:
        plan = plan_transition(state, action)
        assert (plan.target, plan.changes) == (MOVES[state, action], True)
    elif (state, action) in NO_OPS:
        plan = plan_transition(state, action)
        assert (plan.target, plan.changes) == (state, False)
    else:
        with pytest.raises(Conflict) as raised:
            plan_transition(state, action)
        assert state.value in raised.value.message
        assert raised.value.current == state.value
        assert raised.value.allowed == tuple(a.value for a in allowed_actions(state))
        for allowed in raised.value.allowed:
            assert allowed in raised.value.message


def test_terminal_states_allow_nothing() -> None:
    for state in (S.COMPLETED, S.FAILED, S.ABORTED):
        assert state.is_terminal
        assert allowed_actions(state) == ()
    assert allowed_actions(S.NEW) == (A.START, A.ABORT)
