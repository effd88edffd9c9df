"""A worker that dies at a chosen point of an attempt (SIGKILL to itself), for the crash tests.

    python -m support.crash DB_URL STORAGE_ROOT STORAGE_OPTIONS_JSON NAMESPACE JOB LOT POINT

POINT: ``after-write`` (objects written under the attempt folder, nothing committed) or
``before-removal`` (the failure committed with its partial manifest, its objects not removed yet).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from datetime import timedelta

from lotline.domain.manifests import ManifestDraft
from lotline.services import Lineage
from lotline.services.lots import OutputWritten
from lotline.services.manifests import ManifestService
from lotline.storage.objects import Storage
from lotline.store.engine import Store

#: Long enough that no loaded machine outlives it between the claim and the kill: the tests move
#: their services' clock past it instead of waiting.
LEASE = timedelta(hours=1)


def main() -> None:
    db_url, root, options, namespace, job, lot, point = sys.argv[1:]
    lineage = Lineage.over(Store(db_url), Storage(root, json.loads(options)))
    claim = lineage.lots.claim("doomed", namespace, job, lot=lot, lease=LEASE)
    assert claim is not None
    location = lineage.storage.attempt_uri(namespace, claim.dataset, lot, claim.attempt)
    for name in ("part-0.txt", "part-1.txt"):
        lineage.storage.write_bytes(f"{location}/{name}", b"half of a lot\n")
    if point == "after-write":
        os.kill(os.getpid(), signal.SIGKILL)

    def die(_self: ManifestService, _manifest_id: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    ManifestService.remove_partial = die  # type: ignore[assignment, method-assign]
    written = lineage.storage.describe_written(location, format="text")
    lineage.lots.fail(
        claim,
        outputs={claim.dataset: OutputWritten(ManifestDraft(location, written))},
        error="killed on purpose",
    )


if __name__ == "__main__":
    main()
