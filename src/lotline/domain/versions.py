"""Dataset versioning rules of SPEC §3, free of storage concerns."""

from __future__ import annotations

import ast
import textwrap
import uuid
from enum import StrEnum

from lotline.domain.runs import RunState


class VersionState(StrEnum):
    #: The version consumers read for its (dataset, lot).
    CURRENT = "current"
    #: Written by a run that failed or was aborted: never current, never read downstream.
    FAILED = "failed"
    #: Was current, replaced by a later successful version of the same (dataset, lot).
    SUPERSEDED = "superseded"


#: Stored in place of "no lot" so that uniqueness over (dataset, lot) works alike on every database.
UNPARTITIONED = ""


def output_version_state(outcome: RunState) -> VersionState:
    """Rule 4: only a COMPLETED run makes its output versions current."""
    if outcome is RunState.COMPLETED:
        return VersionState.CURRENT
    if outcome in (RunState.FAILED, RunState.ABORTED):
        return VersionState.FAILED
    raise ValueError(f"a run in state {outcome} has no outcome yet")


def mints_output_versions(previous: RunState, outcome: RunState) -> bool:
    """Rule 3 applies to runs that ran: a run aborted before it started wrote nothing."""
    return outcome.is_terminal and previous is RunState.RUNNING


def output_version_id(namespace: str, dataset: str, lot: str, run_id: uuid.UUID) -> uuid.UUID:
    """Name-based id (like Marquez): one run writes one version per (dataset, lot), so replays agree."""
    return uuid.uuid3(uuid.NAMESPACE_URL, f"{namespace}:{dataset}:{lot}:{run_id}")


def input_version_id(namespace: str, dataset: str, lot: str) -> uuid.UUID:
    """Id of the version created by rule 1 (an input first seen with no version)."""
    return uuid.uuid3(uuid.NAMESPACE_URL, f"{namespace}:{dataset}:{lot}:input-creation")


def job_version_id(
    namespace: str,
    job: str,
    location: str | None,
    inputs: list[str],
    outputs: list[str],
    code_digest: str | None = None,
) -> uuid.UUID:
    """A job version is identified by what defines it: inputs, outputs and code location, and for
    jobs whose code lotline runs, the digest of that code (a code change is a new version)."""
    parts = [namespace, job, location or "", ",".join(sorted(inputs)), ",".join(sorted(outputs))]
    key = ":".join([*parts, code_digest] if code_digest else parts)
    return uuid.uuid3(uuid.NAMESPACE_URL, key)


def code_text(source: str) -> str:
    """What of a function's source enters its job's version: its syntax tree written out again, so
    comments, blank lines, layout and docstrings (of the function, and of any function or class
    in it) change nothing, while any change to what runs does. Source that does not parse alone
    (a lambda cut out of a longer line) enters as it is."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            body = node.body
            first = body[0] if body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):  # a docstring
                node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)
