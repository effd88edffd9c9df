"""The arrival pass in ``lotline serve``: a thread that notices, once a minute, the source lots that
became due (OVERDUE events, empty declarations by policy: services/arrival.py), so that a server
alone pushes a late lot within a minute of its due time (docs/deploy.md)."""

from __future__ import annotations

import logging
import threading

from lotline.domain.errors import LotlineError
from lotline.services.arrival import ArrivalPass

#: Seconds between passes: a lot is noticed at most this long after it became due.
EVERY_S = 60.0

_log = logging.getLogger(__name__)


class ArrivalWatch:
    def __init__(self, arrival_pass: ArrivalPass, every: float = EVERY_S) -> None:
        self._pass, self._every = arrival_pass, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lotline-arrival-pass", daemon=True)
        self._failing = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._pass.notice()
                if self._failing:
                    _log.warning("arrival pass: the database answers again")
                self._failing = False
            except LotlineError as error:  # an outage: one line when it goes, the next pass retries
                if not self._failing:
                    _log.warning("arrival pass: %s", error)
                self._failing = True
            self._stop.wait(self._every)
