"""Why a run failed, in one line: what every interface shows of a failure (the run summary, a
worker's log, ``status --lots``, gaps, lot events, the run page). The full stack is kept apart
(the run's ``errorMessage`` facet); this line must be readable on its own and bounded in size."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from datetime import UTC, datetime

from lotline.domain.errors import LotlineError

#: A reason is at most this many characters (the rest is in the stack trace).
MAX_REASON = 1000
#: A stored stack trace is at most this many characters: its head and its tail (issue 39.17).
MAX_STACK = 64 * 1024
#: What a lot stopped by Ctrl-C (or SIGTERM's KeyboardInterrupt) failed with.
INTERRUPTED = "interrupted by the user"


@dataclass(frozen=True)
class Failure:
    """A failure as recorded: its one-line reason, the whole stack it came with (None: none), and
    its kind: the ``code`` of the lotline error it was (``check_failed``: a failing check; None: not
    a lotline error), recorded as ``runs.error_kind`` and never read back from the reason's text."""

    reason: str
    stack: str | None = None
    kind: str | None = None


def failure_of(error: BaseException | str | Failure) -> Failure:
    """``error`` as recorded: an exception's ``one_line`` and its Python stack; a text as its reason.
    ``spark/failures.py`` makes Spark's errors' ``Failure`` itself (the Java cause and stack)."""
    if isinstance(error, Failure):
        return error
    if isinstance(error, str):
        return Failure(bounded(error))
    return Failure(one_line(error), "".join(traceback.format_exception(error)), kind_of(error))


def kind_of(error: BaseException) -> str | None:
    """A failure's kind: a lotline error's ``code``, None for any other exception."""
    return error.code if isinstance(error, LotlineError) else None


def one_line(error: BaseException | str) -> str:
    """A general exception's reason: a lotline error's message, else ``Type: first line``. Spark's
    errors are read deeper by ``spark/failures.py``, which hands its line here to be bounded."""
    if isinstance(error, str):
        return bounded(error)
    if isinstance(error, LotlineError):
        return bounded(error.message)
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    text = first_line(str(error))
    name = type(error).__name__
    return bounded(f"{name}: {text}" if text else name)


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank, stripped."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def bounded(text: str) -> str:
    """``text`` as one line of at most ``MAX_REASON`` characters (whitespace runs made one space)."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 1] + "…"


def lease_expired(owner: str | None, last_beat: datetime | None = None) -> str:
    """The reason of a run the reaper failed: its worker stopped renewing its claim (``last_beat``:
    the claim's last sign of life, its start or last heartbeat)."""
    who = f"worker {owner}" if owner else "its worker"
    when = "" if last_beat is None else f" at {last_beat.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    return f"the lease expired: {who} stopped heartbeating{when} (it died, hung or lost the database)"


def bounded_stack(stack: str | None) -> str | None:
    """A stack trace as stored (the run's ``errorMessage`` facet): at most ``MAX_STACK`` characters,
    its first and last halves with the number of characters left out between them. A 2 MB trace
    (a Spark job's, a deep recursion) was stored whole and served with every run."""
    if stack is None or len(stack) <= MAX_STACK:
        return stack
    half = MAX_STACK // 2
    cut = len(stack) - 2 * half
    return f"{stack[:half]}\n… {cut} characters of the stack trace left out …\n{stack[-half:]}"
