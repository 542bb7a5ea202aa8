"""The JVM a Spark driver runs in, started as PySpark starts it (spark-submit, the settings
given as its ``--conf``), its stderr through a pipe this process relays.

What the JVM says while it starts is held: a JVM that exits before it serves (``--master
yarn`` without HADOOP_CONF_DIR, a heap size it refuses) prints a Java stack there, and the
command ends with the first line it gave as the cause instead, the stack left out. Once it
serves, what it held and everything after goes on to stderr as it comes (Spark's own log
lines, the line that says why a job stopped).
"""
from __future__ import annotations

import atexit
import os
import select
import threading
import time

from rmqtool.errors import SparkFailed

_relay: "_Relay | None" = None
_MAIN_THREAD = 'Exception in thread "main" '  # how the JVM says an exception that ended it
SETTLE_SECONDS = 1.0  # the longest a last line waits for what the JVM wrote before it


def start_jvm(options: dict[str, str]) -> None:
    """The JVM for a session of ``options`` (spark.master, spark.app.name, settings), unless
    one serves already (an earlier session's, spark-submit's); SparkFailed with its first
    line when it exits before serving."""
    global _relay
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.errors import PySparkRuntimeError
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf()
    for key, value in options.items():
        conf.set(key, value)
    relay = _Relay()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": relay.write_fd})
    except PySparkRuntimeError as exc:
        os.close(relay.write_fd)  # the JVM's copy closed when it exited: the relay reads to the end
        if exc.getCondition() != "JAVA_GATEWAY_EXITED":
            relay.release()
            raise
        raise SparkFailed(f"Spark stopped: {_first_line(relay.ended()) or exc}") from None
    except BaseException:
        os.close(relay.write_fd)
        relay.release()
        raise
    os.close(relay.write_fd)  # the JVM holds its own copy: its exit ends the relay
    relay.release()
    _relay = relay
    SparkContext._ensure_initialized(gateway=gateway)  # the session builder finds it and starts no other


def settle() -> None:
    """What the JVM has written so far, out on stderr before the line a command ends with."""
    if _relay is not None:
        _relay.settle(SETTLE_SECONDS)


def _first_line(text: str) -> str | None:
    """The line the JVM's failure starts with: its exception's (the thread's name left out) or
    its own error, past the JVM's warnings and any stack frame."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("WARNING:", "at ")):
            continue
        return line[len(_MAIN_THREAD):] if line.startswith(_MAIN_THREAD) else line
    return None


class _Relay:
    """A pipe for the JVM's stderr, read by a thread: held until :meth:`release`, then
    written to this process's stderr as it comes."""

    def __init__(self):
        self.read_fd, self.write_fd = os.pipe()
        self._held: list[bytes] = []
        self._holding = True
        self._lock = threading.Lock()  # held while a piece is read and passed on
        self._thread = threading.Thread(target=self._run, name="rmqtool-jvm-stderr", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            select.select([self.read_fd], [], [])
            with self._lock:
                data = os.read(self.read_fd, 1 << 16)
                if not data:
                    return
                if self._holding:
                    self._held.append(data)
                else:
                    _write(data)

    def release(self) -> None:
        with self._lock:
            self._holding = False
            for data in self._held:
                _write(data)
            self._held.clear()
        atexit.register(self.settle, SETTLE_SECONDS)  # a daemon thread stops with the process

    def ended(self) -> str:
        """What the JVM said before it exited (its write end closed by the caller first)."""
        self._thread.join(SETTLE_SECONDS * 5)
        with self._lock:
            return b"".join(self._held).decode("utf-8", "replace")

    def settle(self, seconds: float) -> None:
        """Until the pipe is empty with nothing read and not yet written, at most ``seconds``."""
        deadline = time.monotonic() + seconds
        while self._thread.is_alive() and time.monotonic() < deadline:
            with self._lock:
                if not select.select([self.read_fd], [], [], 0)[0]:
                    return
            time.sleep(0.01)


def _write(data: bytes) -> None:
    """To stderr as the JVM wrote it (the descriptor: the JVM's own lines never went through
    Python's buffers); a closed stderr drops it."""
    try:
        while data:
            data = data[os.write(2, data):]
    except OSError:
        pass
