"""Spark Connect: ``LOTLINE_SPARK_MASTER=sc://host:port[/;param=value…]`` (docs/deploy.md "Spark Connect").

The driver then runs in the Connect server, not in this process: there is no JVM to ask, so what
classic mode reads through py4j (the write's listener, the session's context) is read on the
client instead (``spark.connect_capture``). This module parses the URL as Spark Connect defines it
(``pyspark --remote``), checks the server is there before any lot is claimed, and starts the session.
"""

from __future__ import annotations

import re
import socket
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote

from lotline.domain.errors import InvalidInput

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark Connect's port when the URL names none.
DEFAULT_PORT = 15002
#: A parameter's name: Spark Connect's own (``token``, ``use_ssl``, ``user_id``, ``user_agent``,
#: ``session_id``, ``grpc_max_message_size``); any other is sent as a gRPC header (Databricks'
#: ``x-databricks-cluster-id``), whose names are lower-case ASCII.
_PARAMETER = re.compile(r"[a-z0-9][a-z0-9_.-]*")
#: The oldest Spark lotline runs on (the one of ``pyspark>=4.0``).
MINIMUM_SPARK = (4, 0)
#: How long the reachability probe waits for the server's port.
PROBE_TIMEOUT_S = 5.0
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\]]+)(:(?P<port>[0-9]{1,5}))?")
_TRUE = ("true", "1")


@dataclass(frozen=True)
class ConnectUrl:
    """A parsed ``sc://`` URL; ``url`` is as given (pyspark parses it again)."""

    url: str
    host: str
    port: int
    params: tuple[tuple[str, str], ...]

    @property
    def shown(self) -> str:
        """The URL as logs and facets may show it: the token's value is never written down."""
        params = "".join(f";{k}={'***' if k == 'token' else v}" for k, v in self.params)
        return f"sc://{self.host}:{self.port}" + (f"/{params}" if params else "")

    @property
    def tls(self) -> bool:
        """Spark Connect uses TLS when asked (``use_ssl=true``) and whenever a token is given."""
        given = dict(self.params)
        return "token" in given or given.get("use_ssl", "").lower() in _TRUE


def is_connect_master(master: str) -> bool:
    return master.startswith("sc://")


def parse_url(master: str) -> ConnectUrl:
    """``sc://host[:port][/;k=v;…]``, refused in one line when it does not parse."""

    def refuse(why: str) -> InvalidInput:
        return InvalidInput(
            f"LOTLINE_SPARK_MASTER {_redacted(master)!r} is not a Spark Connect URL: {why} "
            "(sc://host:port or sc://host:port/;token=…;use_ssl=true)."
        )

    rest = master[len("sc://") :]
    location, _, tail = rest.partition("/")
    found = _HOST_PORT.fullmatch(location)
    if found is None:
        raise refuse("no host" if not location else f"{location!r} is not host:port")
    port = int(found.group("port") or DEFAULT_PORT)
    if not 0 < port < 65536:
        raise refuse(f"port {port} is out of range")
    params: list[tuple[str, str]] = []
    if tail:
        if not tail.startswith(";"):
            raise refuse("parameters follow the host as /;name=value")
        for pair in tail[1:].split(";"):
            if not pair:
                continue
            name, equals, value = pair.partition("=")
            if not equals or not name:
                raise refuse(f"parameter {pair!r} is not name=value")
            if not _PARAMETER.fullmatch(name):
                raise refuse(
                    f"parameter name {name!r} is not a gRPC header name (lower-case a-z, 0-9, -, _, .)"
                )
            params.append((name, unquote(value)))
    return ConnectUrl(master, found.group("host").strip("[]"), port, tuple(params))


def _redacted(master: str) -> str:
    return re.sub(r"(token=)[^;]*", r"\1***", master)


def start(url: ConnectUrl, app_name: str, conf: dict[str, str]) -> SparkSession:
    """A session on the Connect server at ``url``; the server is asked to be there (its port, then
    its Spark version, the first call that shows a refused token) before anything else happens."""
    try:
        with socket.create_connection((url.host, url.port), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise InvalidInput(
            f"cannot reach the Spark Connect server at {url.host}:{url.port}: {reason}"
        ) from None
    # pyspark 4 warns on import that it does not yet fully support pandas 3 (which lotline does not
    # use over Connect): one line on every command's stderr otherwise.
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    try:
        import pyspark.sql.connect.session  # noqa: F401  # the client's dependencies (grpcio, …)
        from pyspark.sql import SparkSession
    except ImportError as missing:
        raise InvalidInput(
            f"LOTLINE_SPARK_MASTER is a Spark Connect URL but its client is not installed ({missing.name}): "
            "pip install 'lotline[connect]'."
        ) from None
    # pyspark's own builder (not the Connect session's): it also puts the process in Connect mode,
    # so that ``pyspark.sql.functions`` in a pipeline file make Connect's columns.
    builder: Any = SparkSession.builder.remote(url.url).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
        version = spark.version
    except Exception as error:
        raise InvalidInput(f"Spark Connect server at {url.shown}: {_first_line(error)}") from None
    if _version(version) < MINIMUM_SPARK:
        spark.stop()
        raise InvalidInput(
            f"the Spark Connect server at {url.host}:{url.port} runs Spark {version}; lotline needs "
            f"Spark {'.'.join(map(str, MINIMUM_SPARK))} or newer."
        )
    return cast("SparkSession", spark)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", text)[:2])


def _first_line(error: BaseException) -> str:
    """A refused token or an RPC failure, as the one line gRPC's status message gives."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__


def master_of(client: Any) -> str:
    """The ``sc://`` URL a Connect client (pyspark's ``SparkConnectClient``) was built with, as
    ``ConnectUrl.shown`` writes it (no token)."""
    builder = client._builder
    params = "".join(f";{k}={v}" for k, v in sorted(builder._params.items()))
    return parse_url(f"sc://{builder.url.netloc}" + (f"/{params}" if params else "")).shown


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (there is no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
