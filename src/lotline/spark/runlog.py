"""What a transform logs with ``lot.log``, kept with its run (docs/pipelines.md "A lot's log").

Each lot gets a logger of its own (not registered with ``logging``, so thousands of lots leave
nothing behind) whose records still reach the job's logger ``lotline.job.<job>`` and the
application's handlers. Its handler keeps the last ``MAX_LINES`` lines, which the runner records
as the run's ``lotline_log`` facet when the lot ends, with the run's other facets: one write.
"""

from __future__ import annotations

import logging
from collections import deque
from datetime import UTC, datetime
from typing import Any

#: A run keeps the last this many lines of its log ...
MAX_LINES = 1000
#: ... each at most this many characters.
MAX_LINE = 500


class RunLog(logging.Handler):
    """The bounded log of one lot's run."""

    def __init__(self, job: str) -> None:
        super().__init__(logging.DEBUG)
        self.lines: deque[str] = deque(maxlen=MAX_LINES)
        self.count = 0
        self.logger = logging.Logger(f"lotline.job.{job}", logging.DEBUG)
        self.logger.parent = logging.getLogger(f"lotline.job.{job}")
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        at = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        line = f"{at} {record.levelname} {' '.join(message.split())}"
        self.lines.append(line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…")
        self.count += 1

    def facet(self) -> dict[str, Any] | None:
        """The facet's fields (None: the transform logged nothing): the lines kept, oldest first,
        and how many earlier ones were dropped."""
        if not self.count:
            return None
        return {"lines": list(self.lines), "dropped": self.count - len(self.lines)}
