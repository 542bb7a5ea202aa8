"""The SparkSession a fleet job runs in: local mode by default (nothing to start), any
master URL and ``--conf k=v`` otherwise; under ``spark-submit`` the session it made.

Executors run this interpreter (PYSPARK_PYTHON, unless set), so they import the same
rmqtool; partition values stay strings (a topic called ``123`` is not a number); Spark's
own logging is kept to errors so that stderr carries rmqtool's progress and findings.
"""
from __future__ import annotations

import functools
import importlib
import logging
import os
import pathlib
import sys

from rmqtool.errors import ExtraMissing, SparkFailed, UsageError

DEFAULT_MASTER = "local[*]"
SPARK_EXTRA = "pip install 'rmqtool[spark]'"  # what a missing pyspark needs

LOG_CONFIG = os.path.join(os.path.dirname(__file__), "log4j2.properties")
LOCAL_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1"
_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}",
    "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}",
}


def require_pyspark():
    try:
        for module in ("pyspark", "pyarrow"):  # present and importable, not used here
            importlib.import_module(module)
    except ImportError as exc:
        raise ExtraMissing(f"the spark commands need {exc.name}: {SPARK_EXTRA}") from None


def parse_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf takes KEY=VALUE, not {pair!r}")
        conf[key.strip()] = value
    return conf


def check_master(master: str | None) -> None:
    """spark-submit's own rule for a master URL, said before Spark starts (its JVM would
    print a Java stack and exit)."""
    if master is not None and not master.startswith(("spark", "yarn", "k8s", "local")):
        raise UsageError(f"--master must be yarn or start with spark, k8s or local (as spark-submit "
                         f"requires), not {master!r}")


def spark_session(master: str | None = None, conf: dict[str, str] | None = None, app_name: str = "rmqtool"):
    """getOrCreate with rmqtool's defaults under the caller's settings."""
    check_master(master)
    require_pyspark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if (master or DEFAULT_MASTER).startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rmqtool.spark.jvm import start_jvm

    settings = dict(_DEFAULTS)
    if (master or DEFAULT_MASTER).startswith("local"):
        # Local mode: the tasks are Python processes and the JVM mostly waits, but its JIT
        # compiler threads and a parallel GC take CPU from them (with 2 cores, local[2] ran at
        # 1.6x local[1]; C1 only, one compiler thread and the serial GC give it 1.9x).
        settings["spark.driver.extraJavaOptions"] += " " + LOCAL_JVM_OPTIONS
    options = {"spark.app.name": app_name}
    if master or not os.environ.get("SPARK_ENV_LOADED"):  # spark-submit's master wins unless one is given
        options["spark.master"] = master or DEFAULT_MASTER
    options.update({**settings, **(conf or {})})
    start_jvm(options)  # its stderr relayed: a JVM that does not start says why in the last line
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _quiet_py4j()
    return session


class _Py4jRecords(logging.Filter):
    """py4j logs through the root logger, with a traceback, when Ctrl-C interrupts a call into
    the JVM (its KeyboardInterrupt, a reentrant read of the gateway's socket): the command says
    "rmqtool: interrupted" itself, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "py4j" not in pathlib.PurePath(record.pathname).parts


def _quiet_py4j() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _Py4jRecords) for f in root.filters):
        root.addFilter(_Py4jRecords())


def spark_errors(fn):
    """A spark command whose Spark stops (Py4J's Java exceptions, PySpark's own errors) ends
    with one line, exit 8, not Py4J's traceback: the line Spark's log gave just above says
    why (for example "All masters are unresponsive")."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            failed = spark_failure(exc)
            if failed is None:
                raise
            from rmqtool.spark.jvm import settle
            settle()  # Spark's log line that says why goes out before the line that ends the command
            raise failed from None
    return wrapper


def spark_failure(exc: BaseException) -> SparkFailed | None:
    """``exc`` as SparkFailed when Spark raised it; None for anything else."""
    if "py4j" not in sys.modules:
        return None
    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.errors import PySparkException

    if isinstance(exc, Py4JJavaError):
        try:
            text = str(exc.java_exception.toString())
        except Exception:  # the JVM is gone: Py4J's own words
            text = str(exc.errmsg or exc)
    elif isinstance(exc, (Py4JError, PySparkException)):
        text = str(exc)
    else:
        return None
    lines = [line for line in text.splitlines() if line.strip()] or [type(exc).__name__]
    first = lines[0]
    if "Traceback (most recent call last)" in first:  # an executor's Python error: the line it ends with
        raised = next((line for line in lines[1:] if not line[:1].isspace()), None)  # after the indented frames
        first = first[:first.index("Traceback")].rstrip(": ") + (f": {raised}" if raised else "")
    return SparkFailed(f"Spark stopped: {first.strip()}")
