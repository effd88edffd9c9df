"""Configuration: environment variables first, then ``lotline.toml`` in the working directory.

Every value remembers where it came from (``lotline config`` shows it). ``lotline.toml`` uses the
environment's keys (``LOTLINE_DB_URL = …``), and ``namespace`` (SPEC §8) for the default namespace
of the commands that take ``-n``; ``LOTLINE_NAMESPACE`` is the same in the environment.
"""

from __future__ import annotations

import ipaddress
import math
import os
import tomllib
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from lotline.domain.arrival import format_duration, parse_duration
from lotline.domain.coordination import DEFAULT_MAX_ATTEMPTS, check_max_attempts
from lotline.domain.errors import InvalidInput
from lotline.domain.names import validate_name
from lotline.services.cleanup import DEFAULT_SUPERSEDED_GRACE

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
    "LOTLINE_ALLOWED_HOSTS",
    "LOTLINE_MAX_EVENT_WAITERS",
    "LOTLINE_NAMESPACE",
    "LOTLINE_LOG_LEVEL",
    "LOTLINE_SUPERSEDED_GRACE",
    "LOTLINE_MAX_ATTEMPTS",
)
#: The ``lotline.toml`` table of per-dataset declarations (arrival policies: docs/lots.md).
DATASETS_TABLE = "datasets"
#: ``lotline.toml`` keys that stand for an environment key (SPEC §8 names the file's ``namespace``).
FILE_ALIASES = {"namespace": "LOTLINE_NAMESPACE"}
#: What ``Setting.source`` says when neither the environment nor the file sets a key.
DEFAULT_SOURCE = "default"
ENV_SOURCE = "env"
#: Spark's own log level for lotline's commands: errors only (``--verbose``: WARN, Spark's usual).
DEFAULT_LOG_LEVEL = "ERROR"
LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")
#: Seconds the server waits for a request that stopped arriving (headers or body) before a 408.
DEFAULT_READ_TIMEOUT_S = 30.0
#: Requests that may wait for lot events at once in one server process (``?wait=``); more are a 429.
DEFAULT_MAX_EVENT_WAITERS = 32
#: Host names the server always answers for: loopback ones, which no DNS rebinding can reach.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
#: In ``LOTLINE_ALLOWED_HOSTS``: any ``Host`` (when a proxy in front checks it).
ANY_HOST = "*"


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
    #: The ``Host`` names the server answers (others: 421, against DNS rebinding); normalised by
    #: ``host_name``; the loopback names always, ``LOTLINE_ALLOWED_HOSTS`` and the bound address added.
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    #: Long polls of ``GET /lots/events`` that may wait at once, per server process (then 429).
    max_event_waiters: int = DEFAULT_MAX_EVENT_WAITERS
    #: Failed attempts in a row (same inputs, same job version) after which workers and ``lotline
    #: run`` give up on a lot until an input or the job changes or an operator retries it.
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    #: Spark's log level (``LOTLINE_LOG_LEVEL``; ``--verbose`` makes it WARN).
    log_level: str = DEFAULT_LOG_LEVEL
    #: The namespace of commands run without ``-n`` (None: the only one in the database).
    namespace: str | None = None
    #: How long ``lotline cleanup`` keeps a superseded version's objects once a newer current
    #: version of its lot replaced it (``LOTLINE_SUPERSEDED_GRACE``, ISO-8601, default P7D).
    superseded_grace: timedelta = DEFAULT_SUPERSEDED_GRACE

    def serving_on(self, host: str) -> Settings:
        """These settings for a server bound to ``host``: that address is a name it answers to."""
        if host_name(host) in self.allowed_hosts:
            return self
        return replace(self, allowed_hosts=(*self.allowed_hosts, host_name(host)))

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
        known = (*KEYS, *FILE_ALIASES, DATASETS_TABLE)
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


def dataset_policies(directory: Path | None = None) -> dict[str, tuple[str | None, str | None]]:
    """The arrival policies ``lotline.toml`` declares, by dataset name: ``(late_after, absent)``
    texts (None: not set), from tables such as ``[datasets.raw_logs]`` (docs/lots.md)."""
    path = (directory or Path.cwd()) / CONFIG_FILE
    if not path.is_file():
        return {}
    read_configuration(directory)  # the file's errors, said once and alike
    tables = tomllib.loads(path.read_text(encoding="utf-8")).get(DATASETS_TABLE, {})
    if not isinstance(tables, dict):
        raise InvalidInput(f"{DATASETS_TABLE} in {path} must be a table of datasets.")
    found: dict[str, tuple[str | None, str | None]] = {}
    for name, table in tables.items():
        if not isinstance(table, dict) or set(table) - {"late_after", "absent"}:
            raise InvalidInput(f"[{DATASETS_TABLE}.{name}] in {path} may set late_after and absent only.")
        texts = (table.get("late_after"), table.get("absent"))
        if any(t is not None and not isinstance(t, str) for t in texts):
            raise InvalidInput(
                f"late_after and absent in [{DATASETS_TABLE}.{name}] of {path} must be strings."
            )
        found[name] = (texts[0], texts[1])
    return found


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
        allowed_hosts=parse_allowed_hosts(values["LOTLINE_ALLOWED_HOSTS"] or ""),
        max_event_waiters=parse_max_event_waiters(values["LOTLINE_MAX_EVENT_WAITERS"]),
        namespace=validate_name("Namespace", namespace) if namespace else None,
        log_level=parse_log_level(values["LOTLINE_LOG_LEVEL"]),
        superseded_grace=parse_superseded_grace(values["LOTLINE_SUPERSEDED_GRACE"]),
        max_attempts=parse_max_attempts(values["LOTLINE_MAX_ATTEMPTS"]),
    )


#: What a key is when nothing sets it (shown by ``lotline config``).
DEFAULTS = {
    "LOTLINE_DB_URL": DEFAULT_DB_URL,
    "LOTLINE_WAREHOUSE": DEFAULT_WAREHOUSE,
    "LOTLINE_SPARK_MASTER": DEFAULT_SPARK_MASTER,
    "LOTLINE_READ_TIMEOUT": str(DEFAULT_READ_TIMEOUT_S),
    "LOTLINE_MAX_EVENT_WAITERS": str(DEFAULT_MAX_EVENT_WAITERS),
    "LOTLINE_ALLOWED_HOSTS": ",".join(LOOPBACK_HOSTS),
    "LOTLINE_LOG_LEVEL": DEFAULT_LOG_LEVEL,
    "LOTLINE_SUPERSEDED_GRACE": format_duration(DEFAULT_SUPERSEDED_GRACE),
    "LOTLINE_MAX_ATTEMPTS": str(DEFAULT_MAX_ATTEMPTS),
}


def parse_superseded_grace(text: str | None, label: str = "LOTLINE_SUPERSEDED_GRACE") -> timedelta:
    """``LOTLINE_SUPERSEDED_GRACE``: an ISO-8601 duration (``P7D``, ``PT12H``, ``PT0S``), read by the
    parser of arrival policies' lateness windows (so at most 366 days); default P7D."""
    if text is None or not text.strip():
        return DEFAULT_SUPERSEDED_GRACE
    return parse_duration(label, text.strip())


def parse_max_attempts(text: str | None) -> int:
    """``LOTLINE_MAX_ATTEMPTS``: a whole number, at least 1 (default 3)."""
    if text is None or not text.strip():
        return DEFAULT_MAX_ATTEMPTS
    return check_max_attempts(text)


def parse_max_event_waiters(text: str | None) -> int:
    """``LOTLINE_MAX_EVENT_WAITERS``: a whole number, at least 0 (0: no request waits; default 32)."""
    if text is None or not text.strip():
        return DEFAULT_MAX_EVENT_WAITERS
    if not text.strip().isdigit():
        raise InvalidInput(f"LOTLINE_MAX_EVENT_WAITERS must be a whole number (0 or more), got {text!r}.")
    return int(text)


def host_name(host: str) -> str:
    """The form hosts are compared in: lower case, an IPv6 address in brackets (as in a ``Host``
    header), without a port."""
    name = host.strip().lower()
    if name.startswith("["):
        return name[: name.find("]") + 1] if "]" in name else name
    if name.count(":") > 1:  # a bare IPv6 address, as given to --host
        return f"[{name}]"
    return name.partition(":")[0]


def parse_allowed_hosts(text: str) -> tuple[str, ...]:
    """``LOTLINE_ALLOWED_HOSTS="lotline.internal,10.0.0.5"``: names added to the loopback ones;
    ``*`` allows any. A name is a host, without scheme, port or path."""
    hosts = list(LOOPBACK_HOSTS)
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item != ANY_HOST and not _is_host(item):
            raise InvalidInput(
                f"LOTLINE_ALLOWED_HOSTS item {item!r} is not a host name or address "
                "(no scheme, port or path; '*' allows any)."
            )
        name = item if item == ANY_HOST else host_name(item)
        if name not in hosts:
            hosts.append(name)
    return tuple(hosts)


def _is_host(item: str) -> bool:
    bare = item[1:-1] if item.startswith("[") and item.endswith("]") else item
    if ":" in bare:
        try:
            ipaddress.IPv6Address(bare)
        except ValueError:
            return False
        return True
    return all(c.isalnum() or c in "-._" for c in bare) and bare.strip(".") != ""


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
