"""A failed lot's one-line reason over HTTP: the REST run's ``errorMessage`` facet (message: the
line; stackTrace: the whole stack) and the web UI's run page (the line first, the stack folded, the
run's log)."""

from __future__ import annotations

import html
from urllib.parse import quote

import requests

from api.conftest import ApiServer
from lotline.domain.coordination import LotClaim
from lotline.domain.failures import MAX_STACK, Failure
from lotline.domain.runs import LOG_FACET
from lotline.services import Lineage
from lotline.store.engine import Store
from support.lots import LotWorld


def _raise() -> None:
    raise ValueError("bad value 7\nwhile parsing row 3")


def _fail_a_lot(api_server: ApiServer, ns: str, error: BaseException | Failure, log: object) -> LotClaim:
    """A claim of a lot of job ``clean``, failed with ``error`` and the run log ``log``."""
    with Lineage.over(Store(api_server.db_url)) as lineage:
        world = LotWorld(lineage, ns)
        world.job("clean", output="cleaned")
        claim = world.claim("clean", "2023-01-01")
        assert claim is not None
        world.lots.fail(claim, error=error, facets={LOG_FACET: log})
    return claim


def test_the_rest_run_and_the_run_page_show_the_reason_and_keep_the_stack(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    try:
        _raise()
    except ValueError as raised:
        error = raised
    log = {"lines": ["2023-01-01T00:00:00.000000Z INFO read <3> files"], "dropped": 2}
    claim = _fail_a_lot(api_server, fresh_ns, error, log)
    answer = http.get(api_server.api(f"/jobs/runs/{claim.run_id}"), timeout=10)
    assert answer.status_code == 200, answer.text
    facet = answer.json()["facets"]["errorMessage"]
    assert facet["message"] == "ValueError: bad value 7"
    assert "in _raise" in facet["stackTrace"] and "while parsing row 3" in facet["stackTrace"]
    page = requests.get(f"{api_server.url}/runs/{quote(str(claim.run_id))}", timeout=10)
    assert page.status_code == 200
    assert '<pre class="error-text" id="run-error">ValueError: bad value 7</pre>' in page.text
    stack = page.text.split('<details id="run-stack">', 1)[1].split("</details>", 1)[0]
    assert "<summary>stack trace</summary>" in stack
    assert "while parsing row 3" in html.unescape(stack)
    # What the transform logged (lot.log), kept with the run, on its page.
    assert '<pre id="run-log">2023-01-01T00:00:00.000000Z INFO read &lt;3&gt; files</pre>' in page.text
    assert "2 earlier lines not kept" in page.text


def test_a_huge_stack_is_stored_bounded_and_lists_of_runs_leave_the_heavy_facets_out(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    """Issue 39.17: a 2 MB stack trace was stored whole and served in every runs list (a 6 MB page).
    Stored: its head and tail, at most ``MAX_STACK`` characters and the count left out. The run
    itself shows it and its log; the job's runs list and the job's latest run show the reason only."""
    stack = "Traceback (most recent call last):\n" + "  frame\n" * 300_000 + "ValueError: deep\n"
    assert len(stack) > 2_000_000
    log = {"lines": ["x" * 1000] * 100, "dropped": 0}
    claim = _fail_a_lot(api_server, fresh_ns, Failure("ValueError: deep", stack), log)
    run = http.get(api_server.api(f"/jobs/runs/{claim.run_id}"), timeout=10).json()
    kept = run["facets"]["errorMessage"]["stackTrace"]
    assert (
        len(kept) < MAX_STACK + 100 and kept.startswith("Traceback") and kept.endswith("ValueError: deep\n")
    )
    assert f"… {len(stack) - MAX_STACK} characters of the stack trace left out …" in kept
    assert run["facets"][LOG_FACET] == log
    job = api_server.api(f"/namespaces/{quote(fresh_ns, safe='')}/jobs/clean")
    runs = http.get(f"{job}/runs", timeout=10).json()["runs"]
    latest = http.get(job, timeout=10).json()["latestRun"]
    for listed in (runs[0], latest):
        assert listed["id"] == str(claim.run_id)
        assert listed["facets"]["errorMessage"]["message"] == "ValueError: deep"
        assert "stackTrace" not in listed["facets"]["errorMessage"] and LOG_FACET not in listed["facets"]
    assert len(http.get(f"{job}/runs", timeout=10).content) < 20_000
