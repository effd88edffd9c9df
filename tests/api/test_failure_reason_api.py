"""A failed lot's one-line reason over HTTP: the REST run's ``errorMessage`` facet (message: the
line; stackTrace: the whole stack) and the web UI's run page (the line first, the stack folded)."""

from __future__ import annotations

import html
from urllib.parse import quote

import requests

from api.conftest import ApiServer
from lotline.services import Lineage
from lotline.store.engine import Store
from support.lots import LotWorld


def _raise() -> None:
    raise ValueError("bad value 7\nwhile parsing row 3")


def test_the_rest_run_and_the_run_page_show_the_reason_and_keep_the_stack(
    api_server: ApiServer, fresh_ns: str, http: requests.Session
) -> None:
    lineage = Lineage.over(Store(api_server.db_url))
    try:
        world = LotWorld(lineage, fresh_ns)
        world.job("clean", output="cleaned")
        claim = world.claim("clean", "2023-01-01")
        assert claim is not None
        try:
            _raise()
        except ValueError as error:
            world.lots.fail(claim, error=error)
    finally:
        lineage.close()
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
