"""Ingress (SPEC §5): files arriving in a landing location become interval lots of a dataset.

Each lot is published through the same coordination as any produced lot: the dataset's producer
is a job ``ingest:<dataset>`` without inputs, which claims the lot by name and completes it with a
manifest listing the lot's files (referenced in place, or copied into the attempt's fresh
location with ``copy``). So downstream jobs see an ingested lot exactly like a computed one, and
its run and version are in the lineage. What landed for a lot is recorded as a digest in its
manifest's comment (``domain.ingress.digest``): a scan that finds the same files changes
nothing; one that finds a file more (late data), a file replaced or gone (a corrected lot)
reopens the lot and everything computed from it (``LotService.invalidate``) and registers the new
list as the lot's next version — unless ``reject_late``, which only reports it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from lotline.domain.arrival import Absence, is_marker
from lotline.domain.coordination import LotClaim
from lotline.domain.errors import Conflict, InvalidInput, NotFound
from lotline.domain.ingress import (
    LandedFile,
    LotChange,
    LotPlan,
    TimeRule,
    check_range,
    digest,
    format_of,
    lot_range,
    plan_lots,
    sort_into_lots,
)
from lotline.domain.lots import Interval, IntervalLot, parse_lot
from lotline.domain.manifests import ManifestDraft, ManifestObject, check_format
from lotline.services import facets
from lotline.services.arrival import ArrivalPolicies
from lotline.services.catalog import CatalogService
from lotline.services.emission import EmissionService
from lotline.services.lots import LotService, OutputWritten
from lotline.services.manifests import ManifestService
from lotline.services.sources import SourceService
from lotline.storage.objects import Storage
from lotline.store.types import utcnow

#: Readable manifests are looked up this many lots at a time.
_LOOKUP_CHUNK = 1000


def ingest_job(dataset: str) -> str:
    """The job that produces an ingested dataset's lots."""
    return f"ingest:{dataset}"


@dataclass(frozen=True)
class IngestRequest:
    namespace: str
    dataset: str
    landing: str
    interval: Interval
    time_rule: TimeRule = field(default_factory=TimeRule)
    #: How readers read the files; None: the dataset's registered format, else the files' extension.
    format: str | None = None
    copy: bool = False
    start: datetime | None = None
    end: datetime | None = None
    #: The arrival policy's parts given with this ingest (None: the dataset's stored one, else the
    #: default); given ones are stored with the dataset.
    late_after: timedelta | None = None
    absent: Absence | None = None
    #: Where the given policy parts were declared (``lotline ingest`` options, lotline.toml).
    policy_source: str = "lotline ingest"
    reject_late: bool = False
    #: Create the namespace and dataset if they do not exist; else an unknown one is refused. The
    #: command line asks for it (``--create``): a name a person typed may be a typo.
    create: bool = True


@dataclass
class IngestReport:
    """What one scan did: lots by outcome, and the files it could not place (with the reason)."""

    registered: list[str] = field(default_factory=list)
    #: Lots registered empty, each with who declared it (a marker, the policy).
    empty: dict[str, str] = field(default_factory=dict)
    #: Lots due with nothing delivered and not declared empty: nothing registered, reported missing.
    missing: list[str] = field(default_factory=list)
    reversioned: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    unchanged: int = 0
    files: int = 0
    skipped: list[str] = field(default_factory=list)
    #: There were files and the ``--time`` pattern placed none of them: nothing was registered.
    unmatched: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "registered": self.registered,
            "empty": [{"lot": lot, "declaredBy": by} for lot, by in self.empty.items()],
            "missing": self.missing,
            "reversioned": self.reversioned,
            "rejected": self.rejected,
            "waiting": self.waiting,
            "busy": self.busy,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "unmatched": self.unmatched,
        }


class IngestService:
    def __init__(
        self,
        catalog: CatalogService,
        lots: LotService,
        manifests: ManifestService,
        sources: SourceService,
        emission: EmissionService,
        arrival: ArrivalPolicies,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self._catalog, self._lots, self._manifests, self._sources = catalog, lots, manifests, sources
        self._arrival = arrival
        self._emission = emission
        self._storage_options = dict(storage_options or {})
        self._worker = f"ingest@{socket.gethostname()}:{os.getpid()}"

    def ingest(self, request: IngestRequest, now: datetime | None = None) -> IngestReport:
        """Scan the landing location once and register, close, re-version or report every lot."""
        if request.format is not None:
            check_format(request.format)
        check_range(request.start, request.end)
        if not request.create:
            self._catalog.require_known(request.namespace, request.dataset, "--create")
        landing = self._landing(request.landing)
        self._lots.check_output(request.namespace, request.dataset)  # refused: nothing declared
        self._check_interval(request)
        markers: list[str] = []
        files = list(_landed(landing, markers))  # a link that leaves the landing: refused, nothing declared
        scan = sort_into_lots(files, request.time_rule, request.interval, markers)
        if files and not scan.by_lot and not scan.markers and request.time_rule.pattern is not None:
            return IngestReport(files=len(files), skipped=scan.skipped, unmatched=True)
        request = replace(request, format=request.format or self._format(request, files))
        now = now or utcnow()
        self._declare(request, landing)
        policy = self._arrival.declare(
            request.namespace,
            request.dataset,
            request.interval,
            late_after=request.late_after,
            absent=request.absent,
            declared_in=request.policy_source,
            now=now,
        )
        report = IngestReport(files=len(files), skipped=scan.skipped)
        lots = lot_range(scan, request.interval, request.start, request.end)
        registered = self._registered(request, [str(lot) for lot in lots])
        plans = plan_lots(scan, lots, registered, now=now, policy=policy)
        for plan in plans:
            self._apply(request, plan, landing, report, registered.get(plan.lot))
        return report

    def declare_empty(
        self,
        namespace: str,
        dataset: str,
        lots: Sequence[str],
        declared_by: str,
        *,
        force: bool = False,
    ) -> EmptyDeclaration:
        """Register ``lots`` of a source dataset empty, declared by ``declared_by`` (an operator,
        the arrival policy). A lot already empty stays as it is; a lot that holds data is refused
        (InvalidInput, nothing changed) unless ``force``: then it gets a new, empty version and what
        was computed from it is reopened, as a correction does."""
        self._catalog.get_dataset(namespace, dataset)  # NotFound: nothing to declare
        self._lots.check_output(namespace, dataset)
        kind = self._sources.lot_kind(namespace, dataset)
        wanted = [_interval_lot(lot, kind) for lot in lots]
        found = self._manifests.readable(namespace, dataset, wanted)
        holding = [lot for lot in wanted if lot in found and found[lot].objects]
        if holding and not force:
            raise InvalidInput(
                f"lot {holding[0]} of {namespace}:{dataset} holds data ({len(found[holding[0]].objects)} "
                f"objects){f' and {len(holding) - 1} more lots do' if len(holding) > 1 else ''}: an empty "
                "declaration is refused; --force makes a new, empty version and reopens what was computed "
                "from it. Nothing was changed."
            )
        self._lots.register_job(namespace, ingest_job(dataset), output=dataset)
        done = EmptyDeclaration()
        for lot in wanted:
            current = found.get(lot)
            if current is not None and not current.objects:
                done.unchanged.append(lot)
                continue
            if current is not None and not self._lots.invalidate_if_comment(
                namespace, dataset, lot, current.comment
            ):
                done.busy.append(lot)
                continue
            draft = ManifestDraft(
                self._manifests.storage.dataset_uri(namespace, dataset),
                (),
                0,
                comment=digest(()),
                declared_by=declared_by,
            )
            try:
                self._publish(namespace, dataset, lot, _Lister.fixed(draft))
            except Conflict:
                done.busy.append(lot)
                continue
            (done.reversioned if current is not None else done.declared).append(lot)
        return done

    def _check_interval(self, request: IngestRequest) -> None:
        """Lots of another interval than the dataset's are refused, naming both (SPEC §5)."""
        existing = self._sources.lot_kind(request.namespace, request.dataset)
        if existing is not None and existing != str(request.interval):
            raise InvalidInput(
                f"dataset {request.namespace}:{request.dataset} has {existing} lots; "
                f"--interval {request.interval} would add lots of another interval: refused."
            )

    def _format(self, request: IngestRequest, files: list[LandedFile]) -> str:
        """The dataset's registered format (its latest lot's objects'), else the files' extension."""
        registered = self._sources.object_format(request.namespace, request.dataset)
        return registered or format_of(f.relative_path for f in files)

    def _landing(self, location: str) -> Storage:
        options = self._storage_options if location.startswith("s3://") else {}
        landing = Storage(location, options)
        if not landing.root_exists():
            raise InvalidInput(f"landing location {location} does not exist.")
        return landing

    def _declare(self, request: IngestRequest, landing: Storage) -> None:
        """The namespace and dataset if new, and the ingest job as the dataset's producer. The
        dataset's ``physicalName`` is where its files are: the landing location's absolute URI, or
        the warehouse's folder of the dataset when they are copied there."""
        try:
            self._catalog.get_namespace(request.namespace)
        except NotFound:
            self._catalog.upsert_namespace(request.namespace, owner_name="lotline")
        where = (
            self._manifests.storage.dataset_uri(request.namespace, request.dataset)
            if request.copy
            else landing.root
        )
        kind = facets.file_dataset(request.format or "text")  # files of its format, not DB_TABLE
        try:
            known = self._catalog.get_dataset(request.namespace, request.dataset)
        except NotFound:
            known = None
        stale = known is None or any(known.facets.get(name) != facet for name, facet in kind.items())
        if known is None or known.physical_name != where or stale:
            self._catalog.upsert_dataset(request.namespace, request.dataset, physical_name=where, facets=kind)
        self._lots.register_job(request.namespace, ingest_job(request.dataset), output=request.dataset)

    def _registered(self, request: IngestRequest, lots: list[str]) -> dict[str, str | None]:
        """Each lot's readable manifest's digest (None: published without one)."""
        found: dict[str, str | None] = {}
        for index in range(0, len(lots), _LOOKUP_CHUNK):
            chunk = lots[index : index + _LOOKUP_CHUNK]
            for lot, manifest in self._manifests.readable(request.namespace, request.dataset, chunk).items():
                found[lot] = manifest.comment
        return found

    def _apply(
        self, request: IngestRequest, plan: LotPlan, landing: Storage, report: IngestReport, seen: str | None
    ) -> None:
        """``seen``: the digest the lot was registered with when this scan read it. Another ingest
        may have changed the lot since: it is reopened only if it still has that digest, and claimed
        only if it is still open, so concurrent scans make one version per change."""
        if plan.change is LotChange.OPEN:
            if plan.files:
                report.waiting.append(plan.lot)
            return
        if plan.change is LotChange.MISSING:
            report.missing.append(plan.lot)
            return
        if plan.change is LotChange.UNCHANGED:
            report.unchanged += 1
            return
        if plan.change is LotChange.CHANGED:
            if request.reject_late:
                report.rejected.append(plan.lot)
                return
            if not self._lots.invalidate_if_comment(request.namespace, request.dataset, plan.lot, seen):
                report.busy.append(plan.lot)  # another ingest registered it (or is doing so) first
                return
        try:
            self._publish(request.namespace, request.dataset, plan.lot, self._lister(request, plan, landing))
        except Conflict:
            report.busy.append(plan.lot)  # another ingest or an operator holds the lot: next scan
            return
        if plan.change is LotChange.CHANGED:
            report.reversioned.append(plan.lot)
        elif plan.files:
            report.registered.append(plan.lot)
        else:
            report.empty[plan.lot] = plan.declared_by or ""

    def _lister(self, request: IngestRequest, plan: LotPlan, landing: Storage) -> _Lister:
        """What a claim of the lot writes: the files referenced in place, or copied into the
        attempt's fresh location with ``copy``."""
        warehouse = self._manifests.storage
        file_format = request.format or "text"

        def listed(claim: LotClaim) -> ManifestDraft:
            location = landing.root
            if request.copy:
                location = warehouse.attempt_uri(request.namespace, request.dataset, plan.lot, claim.attempt)
                for f in plan.files:
                    warehouse.write_bytes(f"{location}/{f.relative_path}", landing.read_bytes(f.uri))
                objects = warehouse.describe_written(location, format=file_format)
            else:
                objects = tuple(ManifestObject(f.uri, f.size, f.modified_at, file_format) for f in plan.files)
            # An empty lot has no rows, as the runner reports it; a lot of files has an unknown count.
            return ManifestDraft(
                location, objects, None if objects else 0, comment=plan.digest, declared_by=plan.declared_by
            )

        def written(claim: LotClaim) -> ManifestDraft:
            if not request.copy:
                return ManifestDraft(landing.root)
            location = warehouse.attempt_uri(request.namespace, request.dataset, plan.lot, claim.attempt)
            return ManifestDraft(location, warehouse.describe_written(location, format=file_format))

        return _Lister(listed, written)

    def _publish(self, namespace: str, dataset: str, lot: str, lister: _Lister) -> None:
        """Claim the lot, list (or copy) its files, complete it; any failure fails the claim, so the
        lot is either published with its whole list or not at all."""
        claim = self._lots.claim(self._worker, namespace, ingest_job(dataset), lot=lot)
        if claim is None:
            raise Conflict(f"lot {lot} is held")
        self._emission.started(claim)
        run_facets = facets.lot_facets(lot)
        try:
            draft = lister.listed(claim)
            ending = self._emission.completion(claim, {claim.dataset: (draft, {})})
            self._lots.complete(
                claim,
                outputs={claim.dataset: OutputWritten(draft)},
                facets=run_facets,
                journal=ending.journal,
            )
        except BaseException as error:
            written = {claim.dataset: OutputWritten(lister.written(claim))}
            self._lots.fail(claim, outputs=written, error=error, facets=run_facets)
            self._emission.failed(claim, error)
            raise
        self._emission.ended(ending)


@dataclass(frozen=True)
class _Lister:
    """A claim's manifest on success (``listed``) and what it left on failure (``written``)."""

    listed: Callable[[LotClaim], ManifestDraft]
    written: Callable[[LotClaim], ManifestDraft]

    @classmethod
    def fixed(cls, draft: ManifestDraft) -> _Lister:
        """A manifest known before the claim (an empty declaration writes nothing)."""
        return cls(lambda _claim: draft, lambda _claim: draft)


@dataclass
class EmptyDeclaration:
    """What ``declare_empty`` did: lots declared, lots that held data given an empty version
    (``--force``), lots already empty, lots held or being worked on."""

    declared: list[str] = field(default_factory=list)
    reversioned: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "declared": self.declared,
            "reversioned": self.reversioned,
            "unchanged": self.unchanged,
            "busy": self.busy,
        }


def _interval_lot(lot: str, kind: str | None) -> str:
    """An interval lot id of the dataset's interval (``kind``, None: no lots yet), checked."""
    parsed = parse_lot(lot)
    if not isinstance(parsed, IntervalLot):
        raise InvalidInput(
            f"{lot!r} is not an interval lot id (e.g. 20260101PT5M000): only those are declared empty."
        )
    if kind is not None and str(parsed.interval) != kind:
        raise InvalidInput(f"lot {lot} is a {parsed.interval} lot; the dataset has {kind} lots.")
    return str(parsed)


def _landed(landing: Storage, markers: list[str]) -> Iterator[LandedFile]:
    """Every file of the landing location; hidden and marker files (``.x``, ``_x``) are not data;
    empty markers (``_EMPTY.<lot id>``) are added to ``markers`` by their relative path.
    A symbolic link is followed only to a file inside the landing location: one that leaves it
    (``ln -s /etc/hostname …``) or points at nothing is refused, naming it, before anything is
    registered; one to a folder inside is skipped (its files are listed under their own paths)."""
    prefix = landing.root.rstrip("/") + "/"
    for found in landing.objects_under(landing.root):
        relative = found.uri[len(prefix) :]
        if any(part.startswith((".", "_")) for part in relative.split("/")):
            if is_marker(relative.rsplit("/", 1)[-1]) and not any(
                part.startswith((".", "_")) for part in relative.split("/")[:-1]
            ):
                markers.append(relative)
            continue
        if found.link_target is not None:
            target = landing.local_path(found.link_target)
            if not found.link_target.startswith(prefix):
                raise InvalidInput(
                    f"landing file {relative} is a symbolic link to {target}, outside the landing "
                    f"location {landing.local_path(landing.root)}: nothing was registered "
                    "(a link may only point inside the landing location)."
                )
            if not landing.exists(found.link_target):
                raise InvalidInput(
                    f"landing file {relative} is a symbolic link to {target}, which does not exist: "
                    "nothing was registered."
                )
            if landing.is_folder(found.link_target):
                continue
        yield LandedFile(found.uri, relative, found.size, found.modified_at)
