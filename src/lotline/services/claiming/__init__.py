"""How claims are taken and ended: two implementations of one ``ClaimPath`` (``path.py``), chosen
once per ``LotService`` by ``choose`` — statement by statement in Python (``python_path.py``, every
case, every database), or one PostgreSQL function call per step (``database_path.py``, the common
case; the rest it hands to the Python path)."""

from __future__ import annotations

from lotline.domain.clock import SYSTEM_CLOCK, Clock
from lotline.domain.coordination import DEFAULT_MAX_ATTEMPTS
from lotline.services.claiming.database_path import DatabaseClaimPath
from lotline.services.claiming.jobs import JobCache
from lotline.services.claiming.path import ClaimPath
from lotline.services.claiming.python_path import PythonClaimPath
from lotline.store.engine import Store


def choose(
    store: Store,
    clock: Clock,
    jobs: JobCache,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    database_functions: bool | None = None,
) -> ClaimPath:
    """The claim path for ``store``: the database's functions wherever it has them (or as
    ``database_functions`` says), except for a service given a clock of its own — the functions read
    the database's clock, which a test cannot advance."""
    can = store.capabilities
    python_path = PythonClaimPath(
        store, clock, jobs, look_before_writing=can.single_writer, max_attempts=max_attempts
    )
    if database_functions is None:
        database_functions = can.stored_functions and clock is SYSTEM_CLOCK
    return DatabaseClaimPath(store, jobs, python_path) if database_functions else python_path
