"""Spark Connect: ``LOTLINE_SPARK_MASTER=sc://host:port[/;param=value…]`` (docs/deploy.md "Spark Connect").

The driver then runs in the Connect server, not in this process: there is no JVM to ask, so what
classic mode reads through py4j (the write's listener, the session's context) is read on the
client instead (``spark.connect_capture``). This module parses the URL as Spark Connect defines it
(``pyspark --remote``), checks the server is there before any lot is claimed, and starts the session.
"""

from __future__ import annotations

import os
import re
import socket
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
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
        """pyspark uses TLS when asked (``use_ssl=true``) and whenever a token is given (by the URL
        or ``TOKEN_VARIABLE``), but to ``localhost``: a token goes there over gRPC's local
        credentials, a plain connection."""
        given = dict(self.params)
        if given.get("use_ssl", "").lower() == "true":
            return True
        token = "token" in given or bool(os.environ.get(TOKEN_VARIABLE))
        return token and self.host != "localhost"


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
    # gRPC's core logs each failed TLS handshake on stderr (at INFO) unless told before it loads.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
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
    # No options on the builder: getOrCreate would send them at once, with pyspark's default retries.
    builder: Any = SparkSession.builder.remote(url.url)
    try:
        spark = builder.getOrCreate()  # no call to the server yet
    except Exception as error:
        raise refusal(url, error) from None
    try:
        version = _first_calls(spark, {"spark.app.name": app_name, **conf})
    except Exception as error:
        # Closed, the client makes no call at exit (pyspark's clean-up, with its default retries).
        spark.client.close()
        raise refusal(url, error) from None
    try:
        check_version(version, f"{url.host}:{url.port}")
    except InvalidInput:
        spark.stop()
        raise
    return cast("SparkSession", spark)


def _first_calls(spark: Any, conf: dict[str, str]) -> str:
    """Send the session's settings, then ask the server's Spark version, with few retries: the port
    answered the probe, so calls that keep failing are a server that will not talk to this client
    (TLS on one side only), which pyspark's default policy would retry for ten minutes."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = spark.client
    policies = client.get_retry_policies()
    client.set_retry_policies([DefaultPolicy(max_retries=FIRST_CALL_RETRIES)])
    try:
        with warnings.catch_warnings():  # pyspark's own line when the retries run out
            warnings.filterwarnings("ignore", message=r"\[RETRIES_EXCEEDED\]")
            # As the builder would send them: a static setting (the app's name) is skipped silently.
            spark.conf._set_all(configs=conf, silent=True)
            return str(spark.version)
    finally:
        client.set_retry_policies(policies)


#: Retries of the first call (waits of about 0.05, 0.2, 0.8 and 3.2 s).
FIRST_CALL_RETRIES = 4


def check_version(version: str, where: str) -> None:
    """Refuse a server whose Spark (``spark.version``: ``4.0.1``, ``3.5.2-databricks``) is older
    than ``MINIMUM_SPARK``, or whose version does not start with major.minor."""
    needs = f"lotline needs Spark {'.'.join(map(str, MINIMUM_SPARK))} or newer"
    found = re.match(r"([0-9]+)\.([0-9]+)", version.strip())
    if found is None:
        raise InvalidInput(
            f"the Spark Connect server at {where} reports Spark version {version!r}, "
            f"not major.minor; {needs}."
        )
    if (int(found[1]), int(found[2])) < MINIMUM_SPARK:
        raise InvalidInput(f"the Spark Connect server at {where} runs Spark {version}; {needs}.")


def refusal(url: ConnectUrl, error: BaseException) -> InvalidInput:
    """The one line for a server that answered the probe but not the client: a refused (or missing)
    token, a TLS mismatch, any other RPC failure; never the token's value."""
    where = f"{url.host}:{url.port}"
    code = getattr(error, "getGrpcStatusCode", lambda: None)()
    status = getattr(code, "name", None)
    message = _first_line(error)
    if status in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        given = dict(url.params)
        if "token" in given:
            hint = "check the URL's token="
        elif os.environ.get(TOKEN_VARIABLE):
            hint = f"check {TOKEN_VARIABLE}, the token pyspark sends when the URL gives none"
        else:
            hint = "it requires a token (sc://host:port/;token=…)"
        return InvalidInput(
            f"the Spark Connect server at {where} refused the client: {status} ({message}); {hint}"
        )
    if status == "UNAVAILABLE" and url.tls:
        return InvalidInput(
            f"the Spark Connect server at {where} does not answer over TLS, which the client uses with "
            f"use_ssl=true or a token (except to localhost): {message}"
        )
    return InvalidInput(f"Spark Connect server at {url.shown}: {status + ': ' if status else ''}{message}")


#: The environment variable pyspark takes a token from when the URL has none (and the server too).
TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
_DETAILS = re.compile(r'details = "(?P<details>[^"]*)"')


def _first_line(error: BaseException) -> str:
    """An RPC failure in one line: gRPC's status details (pyspark gives the whole status text)."""
    text = str(error)
    details = _DETAILS.search(text)
    if details:
        return details["details"][:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__


def master_of(client: Any) -> str:
    """The ``sc://`` URL a Connect client (pyspark's ``SparkConnectClient``) was built with, as
    ``ConnectUrl.shown`` writes it (no token)."""
    builder = client._builder
    params = "".join(f";{k}={v}" for k, v in sorted(builder._params.items()))
    return parse_url(f"sc://{builder.url.netloc}" + (f"/{params}" if params else "")).shown


def ship_modules(spark: Any, files: Sequence[Path]) -> None:
    """Send ``files`` (a pipeline's helper modules) to the server's Python workers, each once per
    session: a UDF pickles their functions by reference, and the server has no copy of them."""
    session = str(spark.client._session_id)
    for file in files:
        if (session, file) in _SHIPPED:
            continue
        try:
            spark.addArtifacts(str(file), pyfile=True)
        except Exception as error:
            raise InvalidInput(
                f"cannot ship {file} to the Spark Connect server ({master_of(spark.client)}): "
                f"{_first_line(error)}"
            ) from None
        _SHIPPED.add((session, file))


#: (session id, file) of each module ``ship_modules`` sent.
_SHIPPED: set[tuple[str, Path]] = set()


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (there is no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
