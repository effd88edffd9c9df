"""Configuration: environment variables first, then ``lotline.toml`` in the working directory."""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from lotline.domain.errors import InvalidInput

DEFAULT_DB_URL = "sqlite:///./lotline.db"
DEFAULT_WAREHOUSE = "./warehouse"
DEFAULT_SPARK_MASTER = "local[*]"
CONFIG_FILE = "lotline.toml"
KEYS = (
    "LOTLINE_DB_URL",
    "LOTLINE_WAREHOUSE",
    "LOTLINE_API_TOKEN",
    "LOTLINE_S3_ENDPOINT_URL",
    "LOTLINE_SPARK_MASTER",
    "LOTLINE_SPARK_CONF",
    "LOTLINE_OPENLINEAGE_URL",
    "LOTLINE_OPENLINEAGE_API_KEY",
    "LOTLINE_WEBHOOK_URLS",
    "LOTLINE_READ_TIMEOUT",
    "LOTLINE_LOG_LEVEL",
)
#: Spark's own log level for lotline's commands: errors only (``--verbose``: WARN, Spark's usual).
DEFAULT_LOG_LEVEL = "ERROR"
LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")
#: Seconds the server waits for a request that stopped arriving (headers or body) before a 408.
DEFAULT_READ_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Settings:
    db_url: str
    warehouse: str
    api_token: str | None
    #: An S3-compatible endpoint (MinIO, moto, …) for ``s3://`` warehouses and landing folders;
    #: credentials come from the usual AWS variables (``AWS_ACCESS_KEY_ID`` …).
    s3_endpoint_url: str | None = None
    #: Passed to Spark as is: ``local[*]``, ``spark://host:7077``, ``yarn``, ``k8s://https://…``.
    spark_master: str = DEFAULT_SPARK_MASTER
    #: Extra Spark settings, from ``LOTLINE_SPARK_CONF="k=v,k=v"``.
    spark_conf: tuple[tuple[str, str], ...] = ()
    #: Where the runner also emits each lot's run as OpenLineage events (None: nowhere).
    openlineage_url: str | None = None
    openlineage_api_key: str | None = None
    #: Where ``lotline webhooks`` delivers lot events (comma-separated in the configuration).
    webhook_urls: tuple[str, ...] = ()
    #: Seconds the server waits for a request whose headers or body stopped arriving (then 408).
    read_timeout: float = DEFAULT_READ_TIMEOUT_S
    #: Spark's log level (``LOTLINE_LOG_LEVEL``; ``--verbose`` makes it WARN).
    log_level: str = DEFAULT_LOG_LEVEL

    def storage_options(self) -> dict[str, object]:
        """fsspec options for the warehouse's file system."""
        return self.s3_options() if self.warehouse.startswith("s3://") else {}

    def s3_options(self) -> dict[str, object]:
        """fsspec options for any ``s3://`` location (the warehouse, a landing folder)."""
        return {"endpoint_url": self.s3_endpoint_url} if self.s3_endpoint_url else {}


def load_settings(directory: Path | None = None) -> Settings:
    """Read settings; ``lotline.toml`` uses the same keys as the environment (``LOTLINE_DB_URL = …``)."""
    path = (directory or Path.cwd()) / CONFIG_FILE
    from_file: dict[str, object] = {}
    if path.is_file():
        try:
            from_file = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise InvalidInput(f"{path} is not valid TOML: {error}") from error
        unknown = sorted(set(from_file) - set(KEYS))
        if unknown:
            raise InvalidInput(f"{path} has unknown keys {unknown}; known keys are {list(KEYS)}.")

    def pick(key: str) -> str | None:
        value = os.environ.get(key) or from_file.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"{key} in {path} must be a string.")
        return value or None

    return Settings(
        db_url=pick("LOTLINE_DB_URL") or DEFAULT_DB_URL,
        warehouse=pick("LOTLINE_WAREHOUSE") or DEFAULT_WAREHOUSE,
        api_token=pick("LOTLINE_API_TOKEN"),
        s3_endpoint_url=pick("LOTLINE_S3_ENDPOINT_URL"),
        spark_master=pick("LOTLINE_SPARK_MASTER") or DEFAULT_SPARK_MASTER,
        spark_conf=parse_spark_conf(pick("LOTLINE_SPARK_CONF") or ""),
        openlineage_url=pick("LOTLINE_OPENLINEAGE_URL"),
        openlineage_api_key=pick("LOTLINE_OPENLINEAGE_API_KEY"),
        webhook_urls=tuple(u.strip() for u in (pick("LOTLINE_WEBHOOK_URLS") or "").split(",") if u.strip()),
        read_timeout=parse_read_timeout(pick("LOTLINE_READ_TIMEOUT")),
        log_level=parse_log_level(pick("LOTLINE_LOG_LEVEL")),
    )


def parse_log_level(text: str | None) -> str:
    """``LOTLINE_LOG_LEVEL``: one of log4j's levels, any case (default ERROR)."""
    if text is None or not text.strip():
        return DEFAULT_LOG_LEVEL
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise InvalidInput(f"LOTLINE_LOG_LEVEL {text!r} is not one of {', '.join(LOG_LEVELS)}.")
    return level


def parse_read_timeout(text: str | None) -> float:
    """``LOTLINE_READ_TIMEOUT``: a positive number of seconds (default 30)."""
    if text is None or not text.strip():
        return DEFAULT_READ_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        raise InvalidInput(f"LOTLINE_READ_TIMEOUT must be a number of seconds, got {text!r}.") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidInput(f"LOTLINE_READ_TIMEOUT must be a positive number of seconds, got {text!r}.")
    return seconds


def parse_spark_conf(text: str) -> tuple[tuple[str, str], ...]:
    """``spark.executor.memory=2g,spark.sql.shuffle.partitions=64`` -> pairs; a malformed item is an error."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise InvalidInput(f"LOTLINE_SPARK_CONF item {item!r} is not of the form key=value.")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)
