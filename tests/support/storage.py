"""Storage roots for tests: buckets on the test S3 server (the ``s3_endpoint`` fixture)."""

from __future__ import annotations

import uuid

from lotline.storage.objects import Storage


def s3_options(endpoint: str) -> dict[str, object]:
    return {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}


def new_s3_root(endpoint: str, prefix: str = "warehouse") -> str:
    """A fresh bucket on the test S3 server; returns ``s3://<bucket>/<prefix>``."""
    bucket = f"lotline-{uuid.uuid4().hex[:12]}"
    Storage(f"s3://{bucket}", s3_options(endpoint)).fs.mkdir(bucket)
    return f"s3://{bucket}/{prefix}"
