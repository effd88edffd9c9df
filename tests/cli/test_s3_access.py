"""``lotline ingest`` from S3 that lotline cannot use says why in one line (exit 2, nothing
registered), instead of "does not exist": no credentials, an endpoint that does not answer; a
bucket that really is missing still does not exist. Against the test S3 server (moto)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lotline.services import Lineage
from lotline.store.engine import Store
from support.processes import lotline
from support.storage import new_s3_root

#: No credentials anywhere boto looks (and no instance metadata to wait for).
NO_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "",
    "AWS_SECRET_ACCESS_KEY": "",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_EC2_METADATA_DISABLED": "true",
}
KEYS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ingest(landing: str, cwd: Path, db_url: str, settings: dict[str, str]) -> tuple[int, str]:
    args = ("ingest", "--create", "-n", "s3", "-d", "raw", "--landing", landing, "--interval", "PT5M")
    # A separate process: the S3 settings are read from its environment, never from a filesystem
    # object that this process's fsspec cached.
    done = lotline(*args, cwd=cwd, db_url=db_url, settings=settings, process=True)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return done.returncode, lines[0]


# What S3 refuses is said before the database is written to; once, on SQLite.
@pytest.mark.parametrize("backend_url", ["sqlite"], indirect=True)
def test_s3_that_cannot_be_used_says_why(backend_url: str, s3_endpoint: str, tmp_path: Path) -> None:
    landing = new_s3_root(s3_endpoint, "landing")
    bucket = landing.split("/")[2]
    endpoint = {"LOTLINE_S3_ENDPOINT_URL": s3_endpoint}
    code, line = _ingest(landing, tmp_path, backend_url, {**endpoint, **NO_CREDENTIALS})
    assert code == 2
    assert line == (
        f"lotline: error: cannot use s3://{bucket}: no S3 credentials: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or run with an instance role)"
    )
    nowhere = f"http://127.0.0.1:{_closed_port()}"
    code, line = _ingest(landing, tmp_path, backend_url, {"LOTLINE_S3_ENDPOINT_URL": nowhere, **KEYS})
    assert code == 2
    assert line == (
        f"lotline: error: cannot use s3://{bucket}: the S3 endpoint {nowhere} (LOTLINE_S3_ENDPOINT_URL) "
        "cannot be reached"
    )
    missing = landing.replace(bucket, bucket + "-missing")
    code, line = _ingest(missing, tmp_path, backend_url, {**endpoint, **KEYS})
    assert (code, line) == (2, f"lotline: error: landing location {missing} does not exist.")
    with Lineage.over(Store(backend_url)) as lineage:
        assert lineage.catalog.list_namespaces().items == []  # nothing was registered
