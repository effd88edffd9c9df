"""Why a Spark job failed, in one line (docs/pipelines.md "Why a lot failed").

What PySpark raises says little: a ``Py4JJavaError`` reads ``An error occurred while calling
o3128.save.``, the cause being several Java exceptions down; Spark's own messages end in
``SQLSTATE: …`` (``P0001`` for ``raise_error``, which reads like a database's error); a Python
exception raised in a UDF comes wrapped in its worker's traceback. This module reads the chain
down to the innermost cause and keeps what tells the user why: that cause's class and message,
Spark's error class (``[MALFORMED_RECORD_IN_PARSING]``) and the file it names. Any other error is
``domain.failures.one_line``'s.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from typing import Any

from lotline.domain import failures
from lotline.domain.errors import LotlineError

#: At most this many causes are followed (a chain that loops would never end).
_MAX_CAUSES = 16
_CONDITION = re.compile(r"^\[(?P<condition>[A-Z][A-Z0-9_.]*)\]\s*")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?\s*$")
_FILE = re.compile(r"while reading file (?P<file>\S+?)\.?$")
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
#: Error classes that only wrap the cause (they name the file being read, no reason).
_WRAPPERS = ("FAILED_READ_FILE", "TASK_WRITE_FAILED")
_USER_RAISED = "USER_RAISED_EXCEPTION"
_PYTHON_WORKER = {"PythonException", "org.apache.spark.api.python.PythonException"}


@dataclass(frozen=True)
class Cause:
    """One exception of a chain, as far as the line needs it."""

    kind: str  #: the class's simple name
    text: str  #: its whole message

    @property
    def message(self) -> str:
        """The first line, without Spark's ``SQLSTATE`` suffix."""
        return _SQLSTATE.sub("", failures.first_line(self.text))

    @property
    def condition(self) -> str | None:
        """Spark's error class, when the message starts with one (``[MALFORMED_CSV_RECORD] …``)."""
        found = _CONDITION.match(self.message)
        return found.group("condition") if found else None


def failure_of(error: BaseException) -> failures.Failure:
    """The failure to record: the one-line ``reason`` and the whole stack, Python's and (for an
    error PySpark converted from a Java one, whose Python stack stops at the call) the JVM's."""
    stack = "".join(traceback.format_exception(error))
    jvm = getattr(error, "_stackTrace", None)
    if isinstance(jvm, str) and jvm and jvm not in stack:
        stack = f"{stack}\nJVM stack trace:\n{jvm}"
    return failures.Failure(reason(error), stack, failures.kind_of(error))


def reason(error: BaseException) -> str:
    """The one line to record and show for a failed lot."""
    if isinstance(error, (LotlineError, KeyboardInterrupt)):
        return failures.one_line(error)
    chain = java_chain(error)
    if not chain and _is_spark_error(error):
        chain = [Cause(type(error).__name__, str(error))]
    if not chain:
        return failures.one_line(error)
    return failures.bounded(describe(chain))


def describe(chain: list[Cause]) -> str:
    """The line for a chain of causes, outermost first: the innermost cause (a user's message as
    is), after the innermost error class that says more than "while reading", and the file read."""
    innermost = chain[-1]
    files = [m.group("file") for c in chain if (m := _FILE.search(c.message))]
    if innermost.kind in _PYTHON_WORKER or innermost.condition == "PYTHON_EXCEPTION":
        line = python_worker_line(innermost.text)
    elif innermost.condition == _USER_RAISED:
        line = _CONDITION.sub("", innermost.message)
    elif innermost.condition is not None:
        line = innermost.message
    else:
        cause = f"{innermost.kind}: {innermost.message}" if innermost.message else innermost.kind
        classed = [c for c in chain[:-1] if c.condition and not c.condition.startswith(_WRAPPERS)]
        line = f"{classed[-1].message} (cause: {cause})" if classed else cause
    if files and files[0] not in line:
        line = f"{line} (file {files[0]})"
    return line


def python_worker_line(traceback: str) -> str:
    """A Python worker's traceback as the user's message and where it was raised:
    ``ValueError: bad value 0 (clean.py line 23, in parse_row)``."""
    lines = [line for line in (_SQLSTATE.sub("", t) for t in traceback.splitlines()) if line.strip()]
    frames = [m for line in lines if (m := _FRAME.match(line))]
    last = lines[-1].strip() if lines else "the Python worker failed"
    if not frames:
        return last
    where = frames[-1]
    name = where.group("path").rsplit("/", 1)[-1]
    return f"{last} ({name} line {where.group('line')}, in {where.group('function')})"


def java_chain(error: BaseException) -> list[Cause]:
    """The Java exception behind a PySpark error and its causes, outermost first; empty when there
    is none or the JVM can no longer be asked (it may be gone after Ctrl-C)."""
    throwable: Any = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    chain: list[Cause] = []
    try:
        while throwable is not None and len(chain) < _MAX_CAUSES:
            chain.append(Cause(str(throwable.getClass().getSimpleName()), str(throwable.getMessage() or "")))
            throwable = throwable.getCause()
    except Exception:
        pass
    return chain


def _is_spark_error(error: BaseException) -> bool:
    from pyspark.errors import PySparkException

    return isinstance(error, PySparkException)
