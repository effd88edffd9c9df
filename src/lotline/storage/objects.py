"""Object storage for lots, through fsspec: the local warehouse by default, ``s3://…`` through s3fs.

Layout under the root (SPEC §5):

- data: ``<root>/<namespace>/<dataset>/lot=<L>/attempt=<N>/…`` — a fresh location per attempt, so a
  failed attempt never mixes with good data;
- manifest copies: ``<root>/<namespace>/_manifests/datasets/name=<dataset>/lot=<L>/state=<S>``
  ``[/attempt=<N>]/manifest.json`` (``attempt=`` for partial and removed manifests only).

Readers never list these folders to find data; they take the objects a manifest lists. Listing
happens only where lotline needs to know what is *there*: what an attempt actually wrote, and
what cleanup may delete.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fsspec

from lotline.domain import failures
from lotline.domain.errors import InvalidInput
from lotline.domain.lots import validate_lot_id
from lotline.domain.manifests import Manifest, ManifestObject, ManifestState, check_format, manifest_document
from lotline.domain.secrets import masked_url
from lotline.domain.storage_names import MANIFESTS_FOLDER, dataset_prefix, dataset_segments, storage_segments

#: Files that writers (Spark, Hadoop) leave beside the data and that are not part of it.
_NOT_DATA = re.compile(r"^(_SUCCESS|_committed_.*|_started_.*|.*\.crc)$|^[._]")


#: From how many lots ``existing_copy_uris`` lists the dataset's copies instead of checking each.
LIST_COPIES_FROM = 64


@dataclass(frozen=True)
class StoredObject:
    """An object found in storage (a listing: what is there, not what a lot consists of)."""

    uri: str
    size: int
    modified_at: datetime
    #: A symbolic link's fully resolved target (``file://…``), None for anything else.
    link_target: str | None = None


class Storage:
    """One storage root. ``uri`` values are full URLs (``file:///…``, ``s3://bucket/…``)."""

    def __init__(self, root: str, options: Mapping[str, Any] | None = None) -> None:
        if "://" not in root:
            root = Path(root).expanduser().resolve().as_uri()
        options = dict(options or {})
        if root.startswith("s3://"):
            # Other processes (Spark, other workers) write here too: never trust a cached listing.
            options.setdefault("use_listings_cache", False)
        self.fs, path = fsspec.core.url_to_fs(root, **options)
        self.protocol = root.split("://", 1)[0]
        self.root = self._uri(path.rstrip("/"))

    def _uri(self, path: str) -> str:
        if self.protocol == "file":
            return "file://" + path
        return f"{self.protocol}://{path}"

    def _path(self, uri: str) -> str:
        path: str = self.fs._strip_protocol(uri)
        return path

    # -- where things go ------------------------------------------------------------------------
    def dataset_uri(self, namespace: str, dataset: str) -> str:
        return posixpath.join(self.root, *dataset_prefix(namespace, dataset))

    def lot_uri(self, namespace: str, dataset: str, lot: str) -> str:
        return posixpath.join(self.dataset_uri(namespace, dataset), f"lot={validate_lot_id(lot)}")

    def attempt_uri(self, namespace: str, dataset: str, lot: str, attempt: int) -> str:
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise InvalidInput(f"attempt must be a positive integer, got {attempt!r}.")
        return posixpath.join(self.lot_uri(namespace, dataset, lot), f"attempt={attempt}")

    def manifest_copy_uri(self, manifest: Manifest, state: ManifestState | None = None) -> str:
        return self.copy_uri(
            manifest.namespace,
            manifest.dataset,
            manifest.lot,
            state or manifest.state,
            manifest.attempt,
            part=manifest.part,
        )

    def copy_uri(
        self,
        namespace: str,
        dataset: str,
        lot: str,
        state: ManifestState,
        attempt: int,
        *,
        part: str | None = None,
    ) -> str:
        """Where the copy of a manifest in ``state`` goes (``attempt`` matters for partial and
        removed ones only: a lot has one complete or empty copy, that of its current version; a
        child's part adds its folders, ``…/attempt=N/day=2023-01-02/``)."""
        namespace_folders, dataset_folders = dataset_segments(namespace, dataset)
        parts = [
            *namespace_folders,
            MANIFESTS_FOLDER,
            "datasets",
            "name=" + "/".join(dataset_folders),
            f"lot={validate_lot_id(lot)}",
            f"state={state.value}",
        ]
        if state in (ManifestState.PARTIAL, ManifestState.REMOVED) or part is not None:
            parts.append(f"attempt={attempt}")
        if part is not None:
            parts += storage_segments("Part", part)
        return posixpath.join(self.root, *parts, "manifest.json")

    def current_copy_uris(self, namespace: str, dataset: str, lots: Sequence[str]) -> list[str]:
        """``copy_uri`` of the complete and the empty copy of each of these lots, the dataset's
        folders worked out once (a backfill withdraws the copies of a year of lots). The lots are
        stored ids, so valid: checked when written."""
        prefix = self._copies_folder(namespace, dataset)
        states = (ManifestState.COMPLETE, ManifestState.EMPTY)
        return [f"{prefix}/lot={lot}/state={state.value}/manifest.json" for lot in lots for state in states]

    def existing_copy_uris(self, namespace: str, dataset: str, lots: Sequence[str]) -> list[str]:
        """Those of ``current_copy_uris`` that exist. For many lots (a backfill's year), the
        dataset's copies are listed once instead of asking for two objects per lot, which cost more
        than the backfill's database work (and is a request per object on S3)."""
        uris = self.current_copy_uris(namespace, dataset, lots)
        if len(lots) < LIST_COPIES_FROM:
            return [uri for uri in uris if self.fs.exists(self._path(uri))]
        root = self._path(self.root)
        prefix = len(self.root)
        folder = self._path(self._copies_folder(namespace, dataset))
        listed = self.fs.find(folder) if self.fs.exists(folder) else []
        stored = {found[len(root) :] for found in listed}
        return [uri for uri in uris if uri[prefix:] in stored]

    def _copies_folder(self, namespace: str, dataset: str) -> str:
        """Where the dataset's manifest copies are, a folder per lot."""
        namespace_folders, dataset_folders = dataset_segments(namespace, dataset)
        return posixpath.join(
            self.root, *namespace_folders, MANIFESTS_FOLDER, "datasets", "name=" + "/".join(dataset_folders)
        )

    def local_path(self, uri: str) -> str:
        """The path Spark and other local readers take for a ``file://`` uri (uris elsewhere pass)."""
        return self._path(uri) if uri.startswith("file://") else uri

    # -- what is there ----------------------------------------------------------------------------
    def objects_under(self, uri: str) -> Iterator[StoredObject]:
        """Every object below ``uri`` (recursively), written-by-tool markers included. A local
        symbolic link is an object with its ``link_target`` (links to folders are not followed)."""
        path = self._path(uri)
        if not self.fs.exists(path):
            return
        for found, info in sorted(self.fs.find(path, detail=True).items()):
            if info.get("type") == "directory":
                continue
            target = self._uri(os.path.realpath(found)) if info.get("islink") else None
            yield StoredObject(self._uri(found), int(info["size"]), _modified(info), target)

    def describe_written(self, location: str, *, format: str) -> tuple[ManifestObject, ...]:
        """The data files an attempt wrote under ``location``, as manifest objects: sizes and times
        from storage, partition values from ``key=value`` folders below the location."""
        check_format(format)
        prefix = location.rstrip("/") + "/"
        described = []
        for found in self.objects_under(location):
            relative = found.uri[len(prefix) :] if found.uri.startswith(prefix) else found.uri
            *folders, name = relative.split("/")
            if _NOT_DATA.match(name) or any(f.startswith(("_", ".")) for f in folders):
                continue
            partitions = dict(f.split("=", 1) for f in folders if "=" in f)
            described.append(ManifestObject(found.uri, found.size, found.modified_at, format, partitions))
        return tuple(described)

    def stat(self, uri: str) -> StoredObject | None:
        """The object at ``uri`` as storage has it now (None: gone). ``uri`` may be outside this root
        (a landing file ingest referenced in place): another protocol is reached through fsspec."""
        if uri.startswith(self.protocol + "://"):
            fs, path = self.fs, self._path(uri)
        else:
            fs, path = fsspec.core.url_to_fs(uri)
        try:
            info = fs.info(path)
        except FileNotFoundError:
            return None
        return StoredObject(uri, int(info["size"]), _modified(info))

    def root_exists(self) -> bool:
        """A local root is a folder that must exist; an S3 root needs its bucket (keys make folders).
        S3 that cannot be asked (no credentials, no endpoint) is an InvalidInput saying so: s3fs's
        ``exists`` answers False for any failure, which read as "does not exist"."""
        path = self._path(self.root)
        if self.protocol != "s3":
            return bool(self.fs.exists(path if self.protocol == "file" else path.split("/", 1)[0]))
        bucket = path.split("/", 1)[0]
        try:
            self.fs.call_s3("head_bucket", Bucket=bucket)
        except FileNotFoundError:
            return False
        except Exception as error:
            raise InvalidInput(f"cannot use s3://{bucket}: {_s3_problem(error, self.fs)}") from None
        return True

    def exists(self, uri: str) -> bool:
        return bool(self.fs.exists(self._path(uri)))

    def is_folder(self, uri: str) -> bool:
        return bool(self.fs.isdir(self._path(uri)))

    # -- writing ------------------------------------------------------------------------------------
    def write_bytes(self, uri: str, data: bytes) -> None:
        path = self._path(uri)
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with self.fs.open(path, "wb") as handle:
            handle.write(data)

    def read_bytes(self, uri: str) -> bytes:
        with self.fs.open(self._path(uri), "rb") as handle:
            data: bytes = handle.read()
            return data

    def open_input(self, uri: str) -> Any:
        """One object as a binary file that seeks (Parquet readers read its footer first)."""
        return self.fs.open(self._path(uri), "rb")

    def copy_in(self, source_uri: str, target_uri: str) -> None:
        """Copy an object into this storage: through this storage's own connection when the source
        has its protocol (same endpoint and credentials), else wherever fsspec reaches."""
        if source_uri.startswith(self.protocol + "://"):
            self.write_bytes(target_uri, self.read_bytes(source_uri))
            return
        with fsspec.open(source_uri, "rb") as source:
            self.write_bytes(target_uri, source.read())

    def delete(self, uris: Iterable[str]) -> int:
        """Delete objects; ones already gone are fine (cleanup and retries may repeat a delete)."""
        deleted = 0
        for uri in uris:
            path = self._path(uri)
            if self.fs.exists(path):
                self.fs.rm(path)
                deleted += 1
        return deleted

    def delete_empty_folders(self, uri: str) -> None:
        """Remove ``uri`` if it holds no objects any more (local folders linger; S3 has none)."""
        path = self._path(uri)
        if self.protocol == "file" and self.fs.exists(path) and not self.fs.find(path):
            self.fs.rm(path, recursive=True)

    def write_manifest_copy(self, manifest: Manifest) -> str:
        """Write the manifest's JSON copy at its layout place; a removed partial manifest also
        takes the place of its partial copy."""
        uri = self.manifest_copy_uri(manifest)
        document = json.dumps(manifest_document(manifest), indent=2, sort_keys=True).encode()
        self.write_bytes(uri, document)
        if manifest.state is ManifestState.REMOVED:
            self.delete([self.manifest_copy_uri(manifest, ManifestState.PARTIAL)])
        return uri

    def read_manifest_copy(self, uri: str) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.read_bytes(uri))
        return document


def _s3_problem(error: Exception, fs: Any) -> str:
    """What keeps lotline from S3, in the operator's terms (docs/deploy.md "Object storage")."""
    kinds = {kind.__name__ for kind in type(error).__mro__}
    endpoint = getattr(fs, "endpoint_url", None) or (getattr(fs, "client_kwargs", None) or {}).get(
        "endpoint_url"
    )
    if kinds & {"NoCredentialsError", "PartialCredentialsError"}:
        return (
            "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or "
            "run with an instance role)"
        )
    if isinstance(error, PermissionError):
        return "access denied with these credentials"
    if kinds & {"EndpointConnectionError", "ConnectTimeoutError", "ConnectionError", "OSError"}:
        if endpoint:
            return f"the S3 endpoint {masked_url(endpoint)} (LOTLINE_S3_ENDPOINT_URL) cannot be reached"
        return "AWS S3 cannot be reached, and no LOTLINE_S3_ENDPOINT_URL is set for an S3-compatible service"
    return failures.one_line(error)


def _modified(info: Mapping[str, Any]) -> datetime:
    """Modification time from an fsspec info dict (local: ``mtime`` seconds; S3: ``LastModified``)."""
    value = info.get("mtime", info.get("LastModified", info.get("last_modified")))
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return datetime.now(UTC)
