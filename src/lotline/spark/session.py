"""The SparkSession of a ``lotline run``: master and settings from the configuration."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from lotline.services.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Lot windows are UTC, so Spark's timestamps are too; `lotline run` shows its own progress bar.
#: Either can be overridden with LOTLINE_SPARK_CONF.
DEFAULTS = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false"}


@contextmanager
def spark_session(settings: Settings, app_name: str) -> Iterator[SparkSession]:
    """A session on ``LOTLINE_SPARK_MASTER`` with ``LOTLINE_SPARK_CONF``, stopped at the end; a
    session the process already has (an embedding application, a notebook) is used and left running."""
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None:
        yield existing
        return
    builder = SparkSession.builder.master(settings.spark_master).appName(app_name)
    for key, value in {**DEFAULTS, **dict(settings.spark_conf)}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()
