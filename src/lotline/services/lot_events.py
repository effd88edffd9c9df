"""Reading the lot availability log (SPEC §5 "Events"): from any position, once or following it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from lotline.domain.errors import DatabaseUnavailable, InvalidInput
from lotline.domain.manifests import LotEvent
from lotline.services import _common
from lotline.services.outage import Outage
from lotline.store.engine import Listener, Store
from lotline.store.queries import lot_events as q

MAX_PAGE = 1000
#: How long a follower sleeps between looks where nothing wakes it (SQLite), or at most (PostgreSQL).
POLL_SECONDS = 1.0


class LotEventService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def after(
        self,
        position: int = 0,
        *,
        namespace: str | None = None,
        datasets: Sequence[str] = (),
        limit: int = 100,
    ) -> list[LotEvent]:
        """The events after ``position`` (0: from the start), oldest first, optionally of one
        namespace only, or of some datasets of it."""
        if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < 2**63:
            raise InvalidInput(f"position must be a non-negative integer, got {position!r}.")
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}.")
        if datasets and namespace is None:
            raise InvalidInput("A dataset filter needs its namespace.")
        with self._store.read() as connection:
            if namespace is None:
                return q.after(connection, position, limit)
            if datasets:
                ids = [_common.require_dataset(connection, namespace, d) for d in datasets]
                return q.after(connection, position, limit, ids)
            return q.after(
                connection, position, limit, namespace_id=_common.require_namespace(connection, namespace)
            )

    def of_lot(self, namespace: str, dataset: str, lot: str, limit: int = 100) -> list[LotEvent]:
        """One lot's READY and REOPENED events, newest first."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}.")
        with self._store.read() as connection:
            dataset_id = _common.require_dataset(connection, namespace, dataset)
            return q.of_lot(connection, dataset_id, _common.lot_key(lot), limit)

    def last_position(self) -> int:
        with self._store.read() as connection:
            return q.last_position(connection)

    def subscribe(self) -> Listener:
        """A wake-up for new events: ``wait(timeout)`` returns early when one is appended
        (PostgreSQL's NOTIFY; on SQLite it only sleeps). The caller closes it."""
        return self._store.listen(q.CHANNEL)

    def follow(
        self,
        position: int = 0,
        *,
        namespace: str | None = None,
        datasets: Sequence[str] = (),
        poll_seconds: float = POLL_SECONDS,
    ) -> Iterator[LotEvent]:
        """Every event after ``position``, then each new one as it is appended, forever (the caller
        stops iterating). Woken by ``NOTIFY`` on PostgreSQL; polls on SQLite. While the database is
        unreachable it waits and tries again (``outage``: one line when it goes, one when it is
        back), listening anew, and goes on from the last event it gave."""
        outage = Outage()
        listener: Listener | None = None
        try:
            while True:
                try:
                    if listener is None:
                        listener = self.subscribe()
                    page = self.after(position, namespace=namespace, datasets=datasets, limit=MAX_PAGE)
                    outage.recovered()
                except DatabaseUnavailable as error:
                    if listener is not None:
                        listener.close()
                        listener = None
                    outage.wait(error)
                    continue
                yield from page
                if page:
                    position = page[-1].position
                if len(page) < MAX_PAGE:
                    try:
                        listener.wait(poll_seconds)
                    except DatabaseUnavailable:
                        listener.close()
                        listener = None  # the next look fails too, or finds it back
        finally:
            if listener is not None:
                listener.close()
