"""The SparkSession of a ``lotline run``: master and settings from the configuration."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from lotline.domain.errors import InvalidInput
from lotline.services.config import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Lot windows are UTC, so Spark's timestamps are too; `lotline run` shows its own progress bar.
#: Either can be overridden with LOTLINE_SPARK_CONF.
DEFAULTS = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false"}


#: What Spark 4 accepts as a master: ``local``, ``local[4]``, ``local[*]``, ``local[4,2]``, ``yarn``,
#: ``spark://host:7077`` (also several masters), ``k8s://https://host:443``.
_MASTER = re.compile(r"local(\[(\*|[0-9]+)(,[0-9]+)?\])?|yarn|spark://.+|k8s://.+")


def check_master(master: str) -> str:
    """Refuse a master Spark would refuse, before starting a JVM that only says it exited."""
    if not _MASTER.fullmatch(master):
        raise InvalidInput(
            f"LOTLINE_SPARK_MASTER {master!r} is not a Spark master: use local[*], local[N], yarn, "
            "spark://host:port or k8s://https://host:port."
        )
    return master


@contextmanager
def spark_session(settings: Settings, app_name: str) -> Iterator[SparkSession]:
    """A session on ``LOTLINE_SPARK_MASTER`` with ``LOTLINE_SPARK_CONF``, stopped at the end; a
    session the process already has (an embedding application, a notebook) is used and left running."""
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None:
        yield existing
        return
    builder = SparkSession.builder.master(check_master(settings.spark_master)).appName(app_name)
    for key, value in {**DEFAULTS, **dict(settings.spark_conf)}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = lines[0] if lines else type(error).__name__
        raise InvalidInput(f"cannot start Spark on master {settings.spark_master!r}: {reason}") from None
    try:
        yield spark
    finally:
        spark.stop()
