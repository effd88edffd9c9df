"""Property-based requests generated from the app's own OpenAPI document: never a server error.

Bad input must be answered with 4xx (OpenLineage clients retry 5xx), so the one check is
``not_a_server_error``, over every operation, on both databases. The example count is kept
small so the suite stays fast. (Schemathesis' lazy pytest loader does not work with this
pytest, so each operation's strategy is driven by hypothesis directly.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation.case import Case

from api.conftest import AUTH, ApiServer

EXAMPLES = 8
#: Cases drawn per operation for the hostile values (each is sent with every hostile value).
HOSTILE_EXAMPLES = 3


def test_no_server_errors(api_server: ApiServer) -> None:
    schema = schemathesis.openapi.from_url(f"{api_server.url}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Case) -> None:
            if case.query and "wait" in case.query:
                case.query["wait"] = 0  # a long poll's duration is not what is fuzzed here
            case.call_and_validate(base_url=api_server.url, headers=AUTH, checks=[not_a_server_error])

        try:
            check()
        except Exception as error:  # collect every failing operation, then report them all
            failures.append(f"{operation.label}: {str(error)[:800]}")
    assert operations >= 30
    if failures:
        pytest.fail("\n\n".join(failures))


#: Times no database column can hold once in UTC (issue 14, point 3), and edge spellings.
EXTREME_TIMES = [
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00+14:00",
    "10000-01-01T00:00:00Z",
    "0000-12-31T00:00:00Z",
    "2024-02-30T00:00:00Z",
    "9999-12-31T23:59:59.999999+00:00",
]
#: How deep a hostile value nests: around the accepted limit, around the parser's, and past both.
DEPTHS = [64, 65, 300, 1025, 2000]
TIME_PARAMETERS = {"at", "before", "after", "from", "to"}
_DEEP = "__lotline_deep_{}__"


def _event(hostile: object) -> dict[str, object]:
    """An OpenLineage event with a hostile value where clients put arbitrary data or times."""
    return {
        "eventType": "START",
        "eventTime": hostile
        if isinstance(hostile, str) and not hostile.startswith("__")
        else "2024-01-01T00:00:00Z",
        "producer": "https://example.com/hostile",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": "01890f5e-4c1a-7a9e-9b55-0a3c0c0f0f0f", "facets": {"custom": hostile}},
        "job": {"namespace": "hostile", "name": "job"},
        "inputs": [{"namespace": "hostile", "name": "in", "facets": {"custom": hostile}}],
    }


def _serialized(document: object) -> bytes:
    """JSON text, with each deep marker replaced by a value nested that many levels (json.dumps
    itself cannot write what is deeper than Python's recursion limit)."""
    text = json.dumps(document)
    for depth in DEPTHS:
        text = text.replace(json.dumps(_DEEP.format(depth)), "[" * depth + "]" * depth)
    return text.encode()


def _send_hostile(server: ApiServer, case: Case, hostile: str, key: str) -> None:
    """The drawn request with ``hostile`` in its times and its body; a 5xx fails."""
    query = dict(case.query or {})
    for name in TIME_PARAMETERS & {p.name for p in case.operation.query}:
        query[name] = hostile if hostile in EXTREME_TIMES else EXTREME_TIMES[0]
    if case.path.endswith("/lineage/batch"):
        body: object = [_event(hostile), _event("2024-01-01T00:00:00Z")]
    elif case.path.endswith("/lineage"):
        body = _event(hostile)
    elif isinstance(case.body, dict):
        body = {**case.body, key: hostile}
    else:
        body = None  # no body (schemathesis' NOT_SET) or one that is not an object
    answer = requests.request(
        case.method.upper(),
        f"{server.url}{case.formatted_path}",
        params=query,
        data=None if body is None else _serialized(body),
        headers={**AUTH, "Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code < 500, f"{hostile[:40]}: {answer.status_code} {answer.text[:300]}"


def _draw_cases(operation: Any) -> list[tuple[Case, str]]:
    """A few requests of the operation as schemathesis makes them, and a body key to spoil."""
    drawn: list[tuple[Case, str]] = []

    @given(case=operation.as_strategy(), key=st.sampled_from(["facets", "x", "fields"]))
    @settings(
        max_examples=HOSTILE_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def draw(case: Case, key: str) -> None:
        drawn.append((case, key))

    draw()
    return drawn


def test_hostile_values_on_the_write_paths(api_server: ApiServer) -> None:
    """Every write, and every read taking a time, with values nested up to 2,000 levels deep and
    times outside what the store holds: never a server error (issue 14, points 2 and 3)."""
    schema = schemathesis.openapi.from_url(f"{api_server.url}/openapi.json")
    hostile_values = [_DEEP.format(depth) for depth in DEPTHS] + EXTREME_TIMES
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.method.upper() == "GET" and not TIME_PARAMETERS & {p.name for p in operation.query}:
            continue

        drawn = _draw_cases(operation)
        # Sent once hypothesis is done: while it runs it raises the process's recursion limit, and
        # the test server shares this process, so JSON nested past the real limit would not fail.
        for case, key in drawn:
            for hostile in hostile_values:  # every hostile value on every drawn case
                try:
                    _send_hostile(api_server, case, hostile, key)
                except AssertionError as error:
                    failures.append(f"{operation.label}: {str(error)[:800]}")
    if failures:
        pytest.fail("\n\n".join(failures))
