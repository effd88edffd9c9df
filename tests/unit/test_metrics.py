"""The request latency histogram is cumulative, as Prometheus reads it."""

from __future__ import annotations

import re

from lotline.api.metrics import Metrics
from lotline.domain.openlineage import JournalStatus


def test_latency_buckets_count_every_request_at_or_below_their_bound() -> None:
    metrics = Metrics()
    for seconds in (0.001, 0.005, 0.02, 3.0, 10.0):
        metrics.observe("POST", "/api/v1/lineage", 201, seconds)
    text = metrics.render(JournalStatus(0, 0, None), applied=0, failed=0)
    buckets = dict(re.findall(r'lotline_http_request_duration_seconds_bucket\{le="([^"]+)"\} (\d+)', text))
    assert buckets == {
        "0.005": "2",
        "0.01": "2",
        "0.025": "3",
        "0.05": "3",
        "0.1": "3",
        "0.25": "3",
        "0.5": "3",
        "1.0": "3",
        "2.5": "3",
        "5.0": "4",
        "+Inf": "5",
    }
    assert "lotline_http_request_duration_seconds_count 5" in text
    assert 'lotline_http_requests_total{method="POST",path="/api/v1/lineage",status="201"} 5' in text
