"""Request counters and latency in the Prometheus text format (``GET /metrics``).

Kept in-process and dependency-free: one server process, a handful of series. Paths are the
route templates, never raw URLs, so dataset names cannot blow up the number of series.
"""

from __future__ import annotations

import bisect
import datetime
import threading
import time
from collections import defaultdict
from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lotline.domain.grid import CellState, Health
from lotline.domain.openlineage import JournalStatus

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        #: Requests per latency bucket, each counted in the first that holds it (cumulated when
        #: rendered); the last one is +Inf.
        self.latency_buckets = [0] * (len(BUCKETS) + 1)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.events: dict[str, int] = defaultdict(int)

    def observe(self, method: str, path: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, path, status)] += 1
            self.latency_sum += seconds
            self.latency_count += 1
            self.latency_buckets[bisect.bisect_left(BUCKETS, seconds)] += 1

    def count_events(self, result: str, n: int = 1) -> None:
        with self._lock:
            self.events[result] += n

    def render(self, journal: JournalStatus, *, applied: int, failed: int, event_waiters: int = 0) -> str:
        """Request series, events by outcome (accepted, duplicate and rejected by this process's
        POSTs; applied and failed by its projections), the journal's backlog and failures, and
        the requests waiting for lot events."""
        with self._lock:
            lines = [
                "# HELP lotline_http_requests_total HTTP requests by method, route and status.",
                "# TYPE lotline_http_requests_total counter",
            ]
            for (method, path, status), n in sorted(self.requests.items()):
                escaped = path.replace("\\", "\\\\").replace('"', '\\"')
                labels = f'method="{method}",path="{escaped}",status="{status}"'
                lines.append(f"lotline_http_requests_total{{{labels}}} {n}")
            lines += [
                "# HELP lotline_http_request_duration_seconds Time to answer an HTTP request.",
                "# TYPE lotline_http_request_duration_seconds histogram",
            ]
            count = 0
            for bound, in_bucket in zip(BUCKETS, self.latency_buckets, strict=False):
                count += in_bucket
                lines.append(f'lotline_http_request_duration_seconds_bucket{{le="{bound}"}} {count}')
            lines.append(f'lotline_http_request_duration_seconds_bucket{{le="+Inf"}} {self.latency_count}')
            lines.append(f"lotline_http_request_duration_seconds_sum {self.latency_sum:.6f}")
            lines.append(f"lotline_http_request_duration_seconds_count {self.latency_count}")
            lines += [
                "# HELP lotline_openlineage_events_total OpenLineage events by outcome.",
                "# TYPE lotline_openlineage_events_total counter",
            ]
            counts = {**self.events, "applied": applied, "failed": failed}
            for result in ("accepted", "duplicate", "rejected", "applied", "failed"):
                lines.append(f'lotline_openlineage_events_total{{result="{result}"}} {counts.get(result, 0)}')
            lines += [
                "# HELP lotline_lineage_journal_pending Journaled OpenLineage events not projected yet.",
                "# TYPE lotline_lineage_journal_pending gauge",
                f"lotline_lineage_journal_pending {journal.pending}",
                "# HELP lotline_lineage_journal_failed Journaled OpenLineage events that failed to project.",
                "# TYPE lotline_lineage_journal_failed gauge",
                f"lotline_lineage_journal_failed {journal.failed}",
                "# HELP lotline_lot_event_waiters Requests of this process waiting for lot events.",
                "# TYPE lotline_lot_event_waiters gauge",
                f"lotline_lot_event_waiters {event_waiters}",
            ]
        return "\n".join(lines) + "\n"


#: The freshness gauges: (name, help, what of a health it reads).
_FRESHNESS = (
    ("lotline_dataset_lag_seconds", "Seconds the newest complete lot's end lies behind now."),
    ("lotline_lots_due", "Lots due up to now in the counted range (all but the pending ones)."),
    ("lotline_lots_missing", "Due lots that nothing was delivered or computed for."),
    ("lotline_lots_overdue", "Due lots not there and not under way: missing, failed, blocked or held."),
)


def freshness_lines(healths: Sequence[Health], now: datetime.datetime) -> list[str]:
    """Every coordinated dataset's freshness as Prometheus gauges, labelled by namespace and
    dataset (the output of each job with lots), so that an alerting stack can page on it. A
    dataset with no complete lot has no lag series."""
    lines: list[str] = []
    for name, text in _FRESHNESS:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        for health in healths:
            labels = f'namespace="{_escaped(health.namespace)}",dataset="{_escaped(health.dataset)}"'
            lag = health.lag(now)
            value = {
                "lotline_dataset_lag_seconds": None if lag is None else int(lag.total_seconds()),
                "lotline_lots_due": health.due,
                "lotline_lots_missing": health.totals.get(CellState.MISSING, 0),
                "lotline_lots_overdue": health.overdue,
            }[name]
            if value is not None:
                lines.append(f"{name}{{{labels}}} {value}")
    return lines


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "(unmatched)"
            self.metrics.observe(scope["method"], path, status, time.perf_counter() - started)
