"""The SparkSession of a ``lotline run``: master and settings from the configuration."""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lotline.domain import failures
from lotline.domain.errors import InvalidInput
from lotline.services.config import Settings
from lotline.spark import connect
from lotline.spark.pipeline import NeedsSpark, Pipeline, load_pipeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Lot windows are UTC, so Spark's timestamps are too; `lotline run` shows its own progress bar.
#: Either can be overridden with LOTLINE_SPARK_CONF.
DEFAULTS = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false"}


#: What Spark 4 accepts as a master: ``local``, ``local[4]``, ``local[*]``, ``local[4,2]``, ``yarn``,
#: ``spark://host:7077`` (also several masters), ``k8s://https://host:443``; and Spark Connect's
#: ``sc://host:port`` (``spark.connect``).
_MASTER = re.compile(r"local(\[(\*|[0-9]+)(,[0-9]+)?\])?|yarn|spark://.+|k8s://.+")


def check_master(master: str) -> str:
    """Refuse a master Spark would refuse, before starting a JVM that only says it exited."""
    if connect.is_connect_master(master):
        connect.parse_url(master)
    elif not _MASTER.fullmatch(master):
        raise InvalidInput(
            f"LOTLINE_SPARK_MASTER {master!r} is not a Spark master: use local[*], local[N], yarn, "
            "spark://host:port, k8s://https://host:port or a Spark Connect server's sc://host:port."
        )
    return master


#: log4j2's configuration for the driver JVM of lotline's commands: Spark's messages at
#: ``-Dlotline.log.level`` (``LOTLINE_LOG_LEVEL``) on stderr. Given at launch, so even the start-up
#: lines (``Using Spark's default log4j profile``, the WARN banner) follow it.
_LOG4J2 = """\
rootLogger.level = ${sys:lotline.log.level:-error}
rootLogger.appenderRef.stderr.ref = stderr
# The logger Spark takes PySpark's "shell" level from (its log's first user): the same, so it
# does not announce "Setting default log level to WARN" (and set it).
logger.shell.name = org.apache.spark.api.python.PythonGatewayServer
logger.shell.level = ${sys:lotline.log.level:-error}
# What the tasks of a failed lot log, each with its Java stack: lotline reports every failure once
# itself (its stack kept in the run's errorMessage facet); shown from WARN (--verbose) down.
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = ${sys:lotline.task.log.level:-fatal}
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = ${sys:lotline.task.log.level:-fatal}
logger.writer.name = org.apache.spark.sql.execution.datasources.FileFormatWriter
logger.writer.level = ${sys:lotline.task.log.level:-fatal}
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = ${sys:lotline.task.log.level:-fatal}
logger.python.name = org.apache.spark.api.python.PythonRunner
logger.python.level = ${sys:lotline.task.log.level:-fatal}
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_CONSOLE = "spark.ui.showConsoleProgress"


def log_options(level: str, given: str | None = None) -> str:
    """The driver's Java options with lotline's log4j2 configuration at ``level`` (after the
    user's own options; a user's ``log4j2.configurationFile`` is kept instead)."""
    if given and "log4j2.configurationFile" in given:
        return given
    digest = hashlib.sha256(_LOG4J2.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"lotline-log4j2-{digest}.properties"
    if not path.exists():
        path.write_text(_LOG4J2, encoding="utf-8")
    tasks = "fatal" if level in ("OFF", "FATAL", "ERROR") else level.lower()
    ours = (
        f"-Dlog4j2.configurationFile={path.as_uri()} -Dlotline.log.level={level.lower()} "
        f"-Dlotline.task.log.level={tasks}"
    )
    return f"{given} {ours}" if given else ours


#: Where the deploy guide explains what Spark needs for object storage.
_STORAGE_DOCS = 'docs/deploy.md "Object storage"'


#: PySpark's Python loggers that log every analysis error with a query context (a column the data
#: lacks, in a check or a transform) as a JSON record with its whole stack, on stderr, before the
#: error reaches lotline — which reports each failure once, in one line.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def quiet_query_context_logs() -> None:
    """Silence ``QUERY_CONTEXT_LOGGERS`` (at lotline's default log level; ``--verbose`` keeps them)."""
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


def check_storage(spark: SparkSession, root: str) -> None:
    """Refuse, before any lot is claimed, a warehouse Spark cannot write: Hadoop must have a file
    system for its scheme (``s3://`` needs the hadoop-aws jar and ``fs.s3.impl``). Spark would
    otherwise fail every lot, each with a Java stack."""
    scheme = root.split("://", 1)[0] if "://" in root else "file"
    if scheme == "file" or connect.is_connect(spark):
        return  # a Connect server's Hadoop is its own: its first write tells (docs/deploy.md)
    context: Any = spark.sparkContext
    jvm, conf = context._jvm, context._jsc.hadoopConfiguration()
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
        return
    except Exception as error:
        text = str(getattr(error, "java_exception", error))
    impl = conf.get(f"fs.{scheme}.impl")
    if impl is None:
        needs = (
            f'Hadoop has no file system for "{scheme}://": add the hadoop-aws jar (and the AWS SDK '
            f"bundle) to Spark and set spark.hadoop.fs.{scheme}.impl=org.apache.hadoop.fs.s3a.S3AFileSystem"
            if scheme == "s3"
            else f'Hadoop has no file system for "{scheme}://" (spark.hadoop.fs.{scheme}.impl)'
        )
    elif "ClassNotFound" in text or "not found" in text:
        needs = f"spark.hadoop.fs.{scheme}.impl is {impl}, whose jar is not on Spark's classpath" + (
            " (hadoop-aws, with the AWS SDK bundle)" if scheme == "s3" else ""
        )
    else:
        needs = f"Hadoop cannot use {scheme}:// ({failures.first_line(text)})"
    raise InvalidInput(f"Spark cannot write the warehouse {root}: {needs}; see {_STORAGE_DOCS}.")


def ship_code(pipeline: Pipeline, spark: SparkSession) -> None:
    """Make the functions and classes of the pipeline's file travel with the UDFs that use them.

    Spark pickles a module-level function by reference (module and name) and the executors'
    Python workers import it; they cannot import a pipeline file's module, whose name exists
    only in the process that loaded the file. Pickled by value, its code goes along (local
    and cluster masters alike); the file needs no copy on the executors. The modules it imports
    from its own folder (``Pipeline.local_modules``) are pickled by reference: their files are
    sent to the workers before the first lot (``addPyFile``; ``addArtifacts`` on Spark Connect)."""
    from pyspark import cloudpickle

    for module in pipeline.file_modules():
        cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]
    if connect.is_connect(spark):
        connect.ship_modules(spark, pipeline.local_modules())
        return
    for file in pipeline.local_modules():  # a path added again is ignored by Spark
        spark.sparkContext.addPyFile(str(file))


@contextmanager
def spark_session(settings: Settings, app_name: str) -> Iterator[SparkSession]:
    """A session on ``LOTLINE_SPARK_MASTER`` with ``LOTLINE_SPARK_CONF``, stopped at the end; a
    session the process already has (an embedding application, a notebook) is used and left running."""
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None:
        yield existing
        return
    spark = _start(settings, app_name)
    try:
        yield spark
    finally:
        in_fresh_thread(spark.stop)


def _start(settings: Settings, app_name: str) -> SparkSession:
    """A new session on ``LOTLINE_SPARK_MASTER`` with ``LOTLINE_SPARK_CONF`` and lotline's log level."""
    from pyspark.sql import SparkSession

    master = check_master(settings.spark_master)
    if connect.is_connect_master(master):
        # Only session settings travel to a Connect server (its launch settings are the server's).
        runtime = {k: v for k, v in {**DEFAULTS, **dict(settings.spark_conf)}.items() if k != _CONSOLE}
        return connect.start(connect.parse_url(master), app_name, runtime)
    if master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        # Spark's Python workers run `python3` from the PATH unless told: the venv's lotline,
        # called by its path from a shell that never activated the venv, would start workers
        # without pyspark (every UDF failing). A local master's workers are this Python.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master(master).appName(app_name)
    conf = {**DEFAULTS, **dict(settings.spark_conf)}
    conf[_JAVA_OPTIONS] = log_options(settings.log_level, conf.get(_JAVA_OPTIONS))
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        _launch_jvm_apart(master, app_name, conf)
        spark = builder.getOrCreate()
    except Exception as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = lines[0] if lines else type(error).__name__
        raise InvalidInput(f"cannot start Spark on master {settings.spark_master!r}: {reason}") from None
    spark.sparkContext.setLogLevel(settings.log_level)  # where the launch options were not used
    return spark


def application(spark: SparkSession) -> dict[str, str]:
    """The ``spark_applicationDetails`` run facet's fields: the master (a Connect server's URL,
    its token left out), the application's name and id, Spark's version."""
    if connect.is_connect(spark):
        client: Any = spark.client
        conf = spark.conf
        return {
            "master": connect.master_of(client),
            "appName": str(conf.get("spark.app.name", "")),
            "applicationId": str(conf.get("spark.app.id", "")),
            "sparkVersion": spark.version,
            "connectSessionId": str(client._session_id),
        }
    context = spark.sparkContext
    return {
        "master": str(context.master),
        "appName": str(context.appName),
        "applicationId": str(context.applicationId),
        "sparkVersion": spark.version,
    }


def _launch_jvm_apart(master: str, app_name: str, conf: dict[str, str]) -> None:
    """Start Spark's JVM (PySpark's gateway, as the session would) in a session of its own, so that a
    SIGTERM to the command's process group (systemd's default ``KillMode=control-group``) reaches
    the command, which finishes its lot, and not the JVM under it (issue 39.15). The JVM still ends
    with the command: it exits when its stdin, a pipe from this process, closes."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # a JVM this process started before: the session reuses it
        return
    launched = SparkConf().setMaster(master).setAppName(app_name).setAll(list(conf.items()))
    gateway = launch_gateway(launched, popen_kwargs={"start_new_session": True})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway)


def load_pipeline_with_spark(settings: Settings, reference: str) -> Pipeline:
    """``load_pipeline``, starting Spark first if the file needs it at import (a module-level
    ``@F.udf`` asks PySpark for the active session): the session is then the command's, found
    by ``spark_session`` later and stopped when the process exits."""
    try:
        return load_pipeline(reference)
    except NeedsSpark:
        pass
    atexit.register(in_fresh_thread, _start(settings, f"lotline {reference}").stop)
    return load_pipeline(reference)


def in_fresh_thread(call: Callable[[], object]) -> None:
    """Call into Spark from a thread of its own: Ctrl-C may have interrupted this thread in the
    middle of a py4j call, leaving its connection with an answer nobody read (the next call on it
    would read that answer, or fail with a traceback py4j logs)."""
    thread = threading.Thread(target=call, name="lotline spark call", daemon=True)
    thread.start()
    thread.join()
