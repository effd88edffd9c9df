"""Property-based requests generated from the app's own OpenAPI document: never a server error.

Bad input must be answered with 4xx (OpenLineage clients retry 5xx), so the one check is
``not_a_server_error``, over every operation, on both databases. The example count is kept
small so the suite stays fast. (Schemathesis' lazy pytest loader does not work with this
pytest, so each operation's strategy is driven by hypothesis directly.)
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.case import Case

from api.conftest import AUTH, ApiServer

EXAMPLES = 8


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
