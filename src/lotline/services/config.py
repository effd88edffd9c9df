"""Configuration: environment variables first, then ``lotline.toml`` in the working directory.

Every value remembers where it came from (``lotline config`` shows it). ``lotline.toml`` uses the
environment's keys (``LOTLINE_DB_URL = …``), and ``namespace`` (SPEC §8) for the default namespace
of the commands that take ``-n``; ``LOTLINE_NAMESPACE`` is the same in the environment.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from lotline.domain.errors import InvalidInput
from lotline.domain.names import validate_name

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
    "LOTLINE_NAMESPACE",
)
#: ``lotline.toml`` keys that stand for an environment key (SPEC §8 names the file's ``namespace``).
FILE_ALIASES = {"namespace": "LOTLINE_NAMESPACE"}
#: What ``Setting.source`` says when neither the environment nor the file sets a key.
DEFAULT_SOURCE = "default"
ENV_SOURCE = "env"
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
    #: The namespace of commands run without ``-n`` (None: the only one in the database).
    namespace: str | None = None

    def storage_options(self) -> dict[str, object]:
        """fsspec options for the warehouse's file system."""
        return self.s3_options() if self.warehouse.startswith("s3://") else {}

    def s3_options(self) -> dict[str, object]:
        """fsspec options for any ``s3://`` location (the warehouse, a landing folder)."""
        return {"endpoint_url": self.s3_endpoint_url} if self.s3_endpoint_url else {}


@dataclass(frozen=True)
class Setting:
    """One configuration value as read, and where it came from: ``env``, the file, or ``default``."""

    key: str
    value: str | None
    source: str


def read_configuration(directory: Path | None = None) -> dict[str, Setting]:
    """Each key's raw value and source: the environment first, then ``lotline.toml``."""
    path = (directory or Path.cwd()) / CONFIG_FILE
    from_file: dict[str, object] = {}
    if path.is_file():
        try:
            from_file = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise InvalidInput(f"{path} is not valid TOML: {error}") from error
        known = (*KEYS, *FILE_ALIASES)
        unknown = sorted(set(from_file) - set(known))
        if unknown:
            raise InvalidInput(f"{path} has unknown keys {unknown}; known keys are {list(known)}.")
        for alias, key in FILE_ALIASES.items():
            if alias in from_file and key in from_file:
                raise InvalidInput(f"{path} sets both {alias} and {key}; keep one.")
            if alias in from_file:
                from_file[key] = from_file.pop(alias)

    def pick(key: str) -> Setting:
        if os.environ.get(key):
            return Setting(key, os.environ[key], ENV_SOURCE)
        value = from_file.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"{key} in {path} must be a string.")
        return Setting(key, value, str(path)) if value else Setting(key, None, DEFAULT_SOURCE)

    return {key: pick(key) for key in KEYS}


def load_settings(directory: Path | None = None) -> Settings:
    """Read settings; ``lotline.toml`` uses the same keys as the environment (``LOTLINE_DB_URL = …``)."""
    values = {key: setting.value for key, setting in read_configuration(directory).items()}
    namespace = values["LOTLINE_NAMESPACE"]
    return Settings(
        db_url=values["LOTLINE_DB_URL"] or DEFAULT_DB_URL,
        warehouse=values["LOTLINE_WAREHOUSE"] or DEFAULT_WAREHOUSE,
        api_token=values["LOTLINE_API_TOKEN"],
        s3_endpoint_url=values["LOTLINE_S3_ENDPOINT_URL"],
        spark_master=values["LOTLINE_SPARK_MASTER"] or DEFAULT_SPARK_MASTER,
        spark_conf=parse_spark_conf(values["LOTLINE_SPARK_CONF"] or ""),
        openlineage_url=values["LOTLINE_OPENLINEAGE_URL"],
        openlineage_api_key=values["LOTLINE_OPENLINEAGE_API_KEY"],
        webhook_urls=tuple(u.strip() for u in (values["LOTLINE_WEBHOOK_URLS"] or "").split(",") if u.strip()),
        read_timeout=parse_read_timeout(values["LOTLINE_READ_TIMEOUT"]),
        namespace=validate_name("Namespace", namespace) if namespace else None,
    )


#: What a key is when nothing sets it (shown by ``lotline config``).
DEFAULTS = {
    "LOTLINE_DB_URL": DEFAULT_DB_URL,
    "LOTLINE_WAREHOUSE": DEFAULT_WAREHOUSE,
    "LOTLINE_SPARK_MASTER": DEFAULT_SPARK_MASTER,
    "LOTLINE_READ_TIMEOUT": str(DEFAULT_READ_TIMEOUT_S),
}


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
