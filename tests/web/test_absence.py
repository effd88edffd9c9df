"""Absence told in the browser, over REST and in /metrics (SPEC §5 "Absence and freshness"),
against a real server whose clock the test sets: an hour the sender never sent is missing on the
start page, in the grid and on its lot page (with when it fell due); the health bar counts to now
and says how fresh the source is; a source that stops shows its missing lots growing with the
clock, and sorts first."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, expect

from api.conftest import _serve
from lotline.domain.clock import ManualClock
from lotline.domain.ingress import TimeRule
from lotline.domain.lots import Interval
from lotline.services import Lineage
from lotline.services.ingest import IngestRequest
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.lots import LotWorld
from web.test_health import counts_of

NS = "senders"
DAY = datetime(2026, 3, 2, tzinfo=UTC)
NEVER_SENT = 6


@dataclass
class Sender:
    url: str
    clock: ManualClock
    lineage: Lineage


@pytest.fixture
def sender(tmp_path: Path) -> Iterator[Sender]:
    """A source of hourly files, hours 0-9 of a day sent but hour 6, ingested at 10:15; ``late``
    reads it. The server counts up to the test's clock. On SQLite, as every web test
    (``web/conftest.py``): the absence rules' reads run on both in ``tests/lots/test_absence.py``."""
    db_url = f"sqlite:///{tmp_path / 'lotline.db'}"
    store = Store(db_url)
    store.upgrade()
    clock = ManualClock(DAY + timedelta(hours=10, minutes=15))
    lineage = Lineage.over(store, Storage(str(tmp_path / "warehouse")), clock=clock)
    landing = tmp_path / "landing"
    landing.mkdir()
    for n in (h for h in range(10) if h != NEVER_SENT):
        (landing / f"20260302T{n:02d}.log").write_text(f"hour {n}\n")
    rule = TimeRule.parse(r"path:(?P<year>\d{4})(?P<month>\d\d)(?P<day>\d\d)T(?P<hour>\d\d)")
    request_ = IngestRequest(NS, "raw", str(landing), Interval.parse("PT1H"), rule)
    lineage.ingest.ingest(request_, now=clock.now())
    world = LotWorld(lineage, NS)
    world.job("late", output="later", inputs=["raw"])
    world.produce("late", *[f"20260302PT1H{n:03d}" for n in range(NEVER_SENT)])
    server, thread, url = _serve(db_url, clock=clock)
    yield Sender(url, clock, lineage)
    server.should_exit = True
    thread.join(timeout=30)
    lineage.close()


def test_an_hour_never_sent_is_missing_on_every_page_and_a_stopped_source_grows(
    browser: Browser, sender: Sender
) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=sender.url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto(f"/?ns={NS}")
        row = "#jobs tr[data-job='ingest:raw']"
        assert counts_of(page, row) == {"complete": 9, "pending": 1, "missing": 1}
        fresh = page.locator(f"{row} .fresh")
        expect(fresh).to_contain_text("last lot 15 min ago · 1 missing")
        expect(fresh).to_contain_text("to now, 2026-03-02 10:15")
        late = counts_of(page, "#jobs tr[data-job=late]")
        assert (late["blocked"], late["missing"], late["pending"]) == (1, 3, 1)  # 7-9 wait for late's run

        page.goto(f"/datasets/{NS}/raw/lots?res=lot")
        cell = page.locator("#grid a.c[data-lot='20260302PT1H006']")
        expect(cell).to_have_attribute("data-state", "missing")
        expect(page.locator("#grid a.c[data-lot='20260302PT1H010']")).to_have_attribute(
            "data-state", "pending"
        )
        expect(page.locator("#to-now")).to_contain_text("to now")
        page.goto(f"/datasets/{NS}/raw/lots/20260302PT1H006")
        expect(page.locator("#lot-state")).to_have_attribute("data-state", "missing")
        expect(page.locator("#lot-state")).to_contain_text("due since 2026-03-02 07:05")

        sender.clock.advance(timedelta(days=1))  # the sender stopped: a day later, nothing came
        page.goto(f"/?ns={NS}")
        order = page.locator("#jobs tbody tr").evaluate_all("rs => rs.map(r => r.dataset.job)")
        assert order[0] in ("ingest:raw", "late")  # the troubled first
        assert counts_of(page, row) == {"complete": 9, "pending": 1, "missing": 1 + 24}
        expect(page.locator(f"{row} .fresh")).to_have_class(re.compile(r"\blate\b"))
        expect(page.locator(f"{row} .fresh")).to_contain_text("last lot 24 h ago · 25 missing")
    finally:
        context.close()


def test_the_rest_gap_report_resources_and_metrics_tell_the_missing_hour(sender: Sender) -> None:
    """The same truth over REST and Prometheus: the gap report up to now lists the hour, the dataset
    carries its policy and freshness, and the gauges say 1 missing, 15 minutes behind."""
    report = requests.get(f"{sender.url}/api/v1/namespaces/{NS}/datasets/raw/gaps", timeout=30).json()
    assert report["to"] == "2026-03-02T10:15:00Z" and report["counts"]["missing"] == 1
    assert [(r["state"], r["from"]) for r in report["runs"]] == [
        ("missing", "20260302PT1H006"),
        ("pending", "20260302PT1H010"),
    ]
    assert (report["freshness"]["newestLot"], report["freshness"]["lagSeconds"]) == ("20260302PT1H009", 900)
    dataset = requests.get(f"{sender.url}/api/v1/namespaces/{NS}/datasets/raw", timeout=30).json()
    assert dataset["arrivalPolicy"] == {
        "lateAfter": "PT5M",
        "absent": "missing",
        "interval": "PT1H",
        "declaredIn": "lotline ingest",
    }
    assert dataset["freshness"]["missing"] == 1
    job = requests.get(f"{sender.url}/api/v1/namespaces/{NS}/jobs/late", timeout=30).json()
    assert (job["freshness"]["newestLot"], job["freshness"]["overdue"]) == ("20260302PT1H005", 4)
    metrics = requests.get(f"{sender.url}/metrics", timeout=30).text
    assert 'lotline_lots_missing{namespace="senders",dataset="raw"} 1' in metrics
    assert 'lotline_dataset_lag_seconds{namespace="senders",dataset="raw"} 900' in metrics
    assert 'lotline_lots_overdue{namespace="senders",dataset="later"} 4' in metrics  # 3 missing, 1 blocked
