"""The runner's heartbeat: one daemon thread extends the lease of every lot the runner works on, so
a live worker keeps its lots while Spark works, and a lot whose claim was lost is not committed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from lotline.domain.coordination import LotClaim
from lotline.domain.errors import Conflict, DatabaseUnavailable
from lotline.services import Lineage

log = logging.getLogger(__name__)


class ClaimLost(Conflict):
    """The claim stopped being live while Spark worked (lease expired, or the lot was invalidated)."""


def _lost(claim: LotClaim, reason: str) -> str:
    return (
        f"the claim on lot {claim.lot} is no longer live ({reason}); "
        "its result was not committed and the lot will be run again"
    )


class Beat:
    """One lot's claim in the runner's heartbeat (``Heartbeats``): when it is due, and why it was
    lost, if a heartbeat found it no longer live."""

    def __init__(self, claim: LotClaim, due: float) -> None:
        self.claim = claim
        self.due = due
        self.lost: str | None = None

    def check(self) -> None:
        """Raise ClaimLost if a heartbeat found the claim no longer live (the commit would be refused)."""
        if self.lost is not None:
            raise ClaimLost(_lost(self.claim, self.lost))


class Heartbeats:
    """Extends the lease of each lot the runner works on every lease/3 until its end, from one daemon
    thread per runner: a thread started and joined per lot cost both on every lot's path. The
    thread ends after a lease/3 without lots (a runner that is done leaves none behind)."""

    def __init__(self, lineage: Lineage, lease: timedelta) -> None:
        self._lineage, self._lease = lineage, lease
        self._period = lease.total_seconds() / 3
        self._beats: set[Beat] = set()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def beating(self, claim: LotClaim) -> Iterator[Beat]:
        """Heartbeat ``claim`` while the block runs."""
        beat = Beat(claim, time.monotonic() + self._period)
        with self._changed:
            # No wake-up: the thread's next wait ends by then (every other beat is due earlier).
            self._beats.add(beat)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lotline heartbeat", daemon=True)
                self._thread.start()
        try:
            yield beat
        finally:
            with self._changed:
                self._beats.discard(beat)

    def _run(self) -> None:
        idle_since: float | None = None
        while True:
            with self._changed:
                now = time.monotonic()
                if not self._beats:
                    idle_since = idle_since or now
                    if now - idle_since >= self._period:
                        self._thread = None
                        return
                    self._changed.wait(self._period)
                    continue
                idle_since = None
                due = [b for b in self._beats if b.due <= now]
                if not due:
                    self._changed.wait(min(b.due for b in self._beats) - now)
                    continue
            for beat in due:
                self._beat(beat)
                beat.due = time.monotonic() + self._period

    def _beat(self, beat: Beat) -> None:
        claim = beat.claim
        with self._changed:
            if beat not in self._beats or beat.lost is not None:
                return  # its lot ended meanwhile, or it is lost: nothing to extend
        try:
            self._lineage.lots.heartbeat(claim, self._lease)
        except Conflict as lost:
            beat.lost = lost.message
            log.warning("heartbeat of %s lot %s: %s", claim.job, claim.lot, lost.message)
        except DatabaseUnavailable as down:  # one line, not a stack, each beat of an outage
            log.warning("heartbeat of %s lot %s failed: %s", claim.job, claim.lot, down.detail)
        except Exception:
            # The database may be back before the lease runs out: keep beating.
            log.exception("heartbeat of %s lot %s failed", claim.job, claim.lot)
