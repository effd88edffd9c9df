"""A Spark Connect server from pyspark's own distribution, for the tests that run on ``sc://``.

``SPARK_HOME`` is the installed pyspark package: its ``sbin/start-connect-server.sh`` starts the
server (``jars/spark-connect_*.jar`` is in the wheel) with ``--master local[1]`` on 127.0.0.1 at a
free port; it runs in the foreground (``SPARK_NO_DAEMONIZE``) in a process group of its own, so
stopping it is a signal to that group. Nothing is downloaded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.jvm_archive import daemon_options

#: The server's settings: one core, small JVM, one shuffle partition (the suite shares two cores).
CONF = {
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.driver.defaultJavaOptions": daemon_options(),  # the suite's JVM options and archive
}
START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def connect_server(folder: Path, conf: dict[str, str] | None = None) -> Iterator[str]:
    """``sc://127.0.0.1:<port>`` while the block runs, with ``conf`` beside ``CONF`` (a token: see
    ``tests/spark/test_connect_edges.py``); the server's log is ``folder/server.log``."""
    import pyspark

    home = Path(pyspark.__file__).parent
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_LOG_DIR": str(folder),
        "SPARK_PID_DIR": str(folder),
        # The server's Python workers (UDFs) run this Python, which has lotline's dependencies.
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    command = [str(home / "sbin" / "start-connect-server.sh"), "--master", "local[1]"]
    for key, value in {**CONF, **(conf or {}), "spark.connect.grpc.binding.port": str(port)}.items():
        command += ["--conf", f"{key}={value}"]
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Spark Connect server did not start: {(folder / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
