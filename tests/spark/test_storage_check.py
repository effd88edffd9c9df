"""An ``s3://`` warehouse Spark cannot write (no hadoop-aws jar, no ``fs.s3.impl``) is one line
naming what is missing and where docs/deploy.md explains it, before any lot is claimed; on SQLite
and PostgreSQL, the warehouse a bucket on the test S3 server (moto)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from lotline.cli.main import app
from lotline.domain.errors import InvalidInput
from lotline.services import Lineage
from lotline.spark.pipeline import load_pipeline
from lotline.spark.registration import register
from lotline.spark.runner import LotRunner
from lotline.storage.objects import Storage
from lotline.store.engine import Store
from support.spark import PIPELINES, ingest
from support.storage import new_s3_root, s3_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MISSING = 'Hadoop has no file system for "s3://": add the hadoop-aws jar'
DOCS = 'see docs/deploy.md "Object storage".'


def test_an_s3_warehouse_without_hadoop_aws_is_refused_before_any_claim(
    backend_url: str, s3_endpoint: str, spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = new_s3_root(s3_endpoint)
    with Lineage.over(Store(backend_url), Storage(root, s3_options(s3_endpoint))) as lineage:
        weblogs = load_pipeline(str(PIPELINES / "weblogs.py"))
        register(lineage, weblogs)
        ingest(lineage, "weblogs", "raw_logs", "20230101PT30M000", [["2023-01-01T00:01:00 /a 200"]])
        with pytest.raises(InvalidInput) as refused:
            LotRunner(lineage, weblogs, spark)
        assert refused.value.message.startswith(f"Spark cannot write the warehouse {root}: {MISSING}")
        assert refused.value.message.endswith(DOCS)
        # The same through `lotline run`: one line, exit 2, and no lot claimed.
        monkeypatch.setenv("LOTLINE_DB_URL", backend_url)
        monkeypatch.setenv("LOTLINE_WAREHOUSE", root)
        monkeypatch.setenv("LOTLINE_S3_ENDPOINT_URL", s3_endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.chdir(tmp_path)
        result = CliRunner().invoke(app, ["run", str(PIPELINES / "weblogs.py")])
        assert result.exit_code == 2, result.output
        [line] = result.stderr.splitlines()
        assert line.startswith("lotline: error: Spark cannot write the warehouse") and line.endswith(DOCS)
        assert [(r.job, r.status.value) for r in lineage.lots.status("weblogs")] == [
            ("ingest_raw_logs", "READY")
        ]
