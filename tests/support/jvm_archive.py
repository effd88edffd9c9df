"""Faster Spark JVMs for the suite: a class-data sharing archive of the classes a local Spark loads.

Most of a short ``lotline run``'s time is its JVM loading and verifying Spark's classes (measured on
the 2-core machine: a local session that writes one Parquet file took 7.7 s, 3.6 s with the
archive). The JVM can dump the classes it loaded into an archive at exit
(``-XX:ArchiveClassesAtExit``) and map them from it at the next start (``-XX:SharedArchiveFile``).

The suite makes the archive once (kept in pytest's cache, named by the Java and pyspark versions)
and hands it to every JVM that PySpark launches, in the suite's own process and in the processes it
starts (``lotline run``, workers), through ``PYSPARK_SUBMIT_ARGS``: the one setting every such
launch reads and that lotline itself never sets. The JVMs that Spark's own scripts start (a
standalone master and worker, their executors, a Spark Connect server) get the same options from
``SPARK_DAEMON_JAVA_OPTS``, which Spark's launcher gives a master and a worker, and the tests that
start the others read (``daemon_options``). ``spark.driver.defaultJavaOptions`` is prepended to the
``spark.driver.extraJavaOptions`` lotline sets, so what a test sets still applies. An archive
the JVM cannot use (another class path) is ignored, silently (``-Xlog:disable``: the JVM's own
log would otherwise print a warning on standard output).

Test-only: lotline's users keep Spark's defaults (C2 compiles long jobs faster than C1).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: JVM options of the suite's Spark JVMs (``spark.driver.defaultJavaOptions``): the serial collector
#: and C1 only (short-lived JVMs on two cores), the archive, and the JVM's own logging off (above).
_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xlog:disable -Xlog:all=off"

#: What the archive's JVM does: the classes a lot's run loads (a session, a shuffle, Parquet out and
#: back in, a Python UDF).
_WORKLOAD = """
import sys
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
frame = spark.range(100).withColumn("k", F.col("id") % 3)
frame = frame.withColumn("u", F.udf(lambda v: v + 1, "long")("id"))
frame.groupBy("k").agg(F.count("*").alias("n")).write.mode("overwrite").parquet(sys.argv[1])
spark.read.parquet(sys.argv[1]).collect()
spark.stop()
"""


def _versions() -> str:
    import pyspark

    java = shutil.which("java") or ""
    found = subprocess.run([java, "-version"], capture_output=True, text=True, check=False) if java else None
    return f"{pyspark.__version__}|{os.path.realpath(java)}|{found.stderr if found else ''}"


def java_options(archive: Path | None, option: str = "-XX:SharedArchiveFile") -> str:
    """The suite's JVM options with ``archive`` (to map it, or with ``-XX:ArchiveClassesAtExit`` to
    make it), when there is one."""
    return _OPTIONS if archive is None else f"{option}={archive} {_OPTIONS}"


def daemon_options() -> str:
    """The options conftest gives the JVMs Spark's own scripts start (``SPARK_DAEMON_JAVA_OPTS``:
    with the archive), for the tests that start them; the suite's options alone if it gave none."""
    return os.environ.get("SPARK_DAEMON_JAVA_OPTS", _OPTIONS)


def submit_args(archive: Path | None, option: str = "-XX:SharedArchiveFile") -> str:
    """``PYSPARK_SUBMIT_ARGS`` for JVMs with ``java_options``."""
    options = java_options(archive, option)
    # No Spark UI either (a Jetty server per JVM: 0.7 s of a 4.4 s local session); a test's own
    # settings (LOTLINE_SPARK_CONF, the builder's) still win over these.
    return f'--conf "spark.driver.defaultJavaOptions={options}" --conf spark.ui.enabled=false pyspark-shell'


def ensure_archive(folder: Path) -> Path | None:
    """The archive in ``folder`` for this Java and pyspark, made first if missing (one JVM run, about
    12 s); ``None`` where it cannot be made (no Java): the JVMs then start as they would."""
    if shutil.which("java") is None:
        return None
    key = hashlib.sha256(_versions().encode()).hexdigest()[:16]
    archive = folder / f"spark-{key}.jsa"
    if archive.exists():
        return archive
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"spark-{key}.{os.getpid()}.partial"
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_SUBMIT_ARGS": submit_args(partial, "-XX:ArchiveClassesAtExit"),
    }
    made = subprocess.run(
        [sys.executable, "-c", _WORKLOAD, str(folder / f"workload-{os.getpid()}")],
        env=env,
        capture_output=True,
        check=False,
        timeout=300,
    )
    shutil.rmtree(folder / f"workload-{os.getpid()}", ignore_errors=True)
    if made.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        return None
    partial.replace(archive)  # whole or absent: a JVM never maps a half-written archive
    return archive


if __name__ == "__main__":  # scripts/test makes it while its checks run: python jvm_archive.py FOLDER
    ensure_archive(Path(sys.argv[1]))
