"""The SparkSession a fleet job runs in: local mode by default (nothing to start), any
master URL and ``--conf k=v`` otherwise; under ``spark-submit`` the session it made.

Executors run this interpreter (PYSPARK_PYTHON, unless set), so they import the same
rmqtool; partition values stay strings (a topic called ``123`` is not a number); Spark's
own logging is kept to errors so that stderr carries rmqtool's progress and findings.
"""
from __future__ import annotations

import importlib
import os
import sys

from rmqtool.errors import ExtraMissing, UsageError

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


def spark_session(master: str | None = None, conf: dict[str, str] | None = None, app_name: str = "rmqtool"):
    """getOrCreate with rmqtool's defaults under the caller's settings."""
    require_pyspark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if (master or DEFAULT_MASTER).startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    settings = dict(_DEFAULTS)
    if (master or DEFAULT_MASTER).startswith("local"):
        # Local mode: the tasks are Python processes and the JVM mostly waits, but its JIT
        # compiler threads and a parallel GC take CPU from them (with 2 cores, local[2] ran at
        # 1.6x local[1]; C1 only, one compiler thread and the serial GC give it 1.9x).
        settings["spark.driver.extraJavaOptions"] += " " + LOCAL_JVM_OPTIONS
    builder = SparkSession.builder.appName(app_name)
    if master or not os.environ.get("SPARK_ENV_LOADED"):  # spark-submit's master wins unless one is given
        builder = builder.master(master or DEFAULT_MASTER)
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
