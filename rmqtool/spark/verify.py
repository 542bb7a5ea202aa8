"""``rmqtool spark verify``: ``verify`` of many stores, a store a task, as one table.

Each executor runs the one verify of its store's family (families/: RocketMQ's, a DLedger
store's, QMQ's) on its store, in one process (the cluster gives the parallelism), and
returns its findings as ``verify`` rows with the store's name; the driver adds a summary
per store.
"""
from __future__ import annotations

import pathlib

from rmqtool.spark.stores import StoreSpec


def verify_store_task(spec: StoreSpec, now_ms: int | None = None) -> dict:
    """Executor side: the findings of one store (or why it could not be checked); ``now_ms``:
    verify's --now."""
    import tempfile

    from rmqtool.errors import RmqError, error_line
    from rmqtool.spark import remote

    try:
        if remote.is_uri(spec.path):  # verify reads every file: the store is staged whole
            with tempfile.TemporaryDirectory(prefix="rmqtool-stage-") as tmp:
                remote.require_store(spec.path)
                remote.stage_tree(spec.path, pathlib.Path(tmp))
                run = _local_verify(tmp, now_ms)
                rows = [{"store_name": spec.name, **remote.named_as_uris(f.to_json(), tmp, spec.path)}
                        for f in run.findings()]
        else:
            run = _local_verify(spec.path, now_ms)
            rows = [{"store_name": spec.name, **f.to_json()} for f in run.findings()]
    except (RmqError, OSError) as exc:  # a store that cannot be checked: the error's code, as verify gives it
        line, code = error_line(exc)
        return {"store_name": spec.name, "path": spec.path, "rows": [], "error": line, "exit_code": int(code)}
    return {"store_name": spec.name, "path": spec.path, "rows": rows, "error": None, "exit_code": run.exit_code}


def _local_verify(path: str, now_ms: int | None = None):
    """The one verify of the store's family, as ``verify`` runs it (QMQ's; a DLedger store's
    entry log checks; the plain commit log's), in one process."""
    from rmqtool.store.family import QMQ, detect_family
    from rmqtool.verify.base import VerifyOptions

    options = VerifyOptions(jobs=1, now_ms=now_ms)
    if detect_family(path) is QMQ:
        from rmqtool.store.qmq.view import open_qmq_store
        from rmqtool.verify.qmq.run import QmqVerify
        return QmqVerify(open_qmq_store(path), options)
    from rmqtool.verify.run import open_verifiable, verify_run
    return verify_run(open_verifiable(path), options)


def summary_row(result: dict) -> dict:
    rows = result["rows"]
    count = lambda level: sum(1 for r in rows if r["severity"] == level)  # noqa: E731
    return {"record": "verify_summary", "store_name": result["store_name"], "store_path": result["path"],
            "finding_count": len(rows), "error_count": count("error"), "warning_count": count("warning"),
            "info_count": count("info"),
            "exit_code": result["exit_code"], "error": result["error"]}


def verify_fleet(spark, specs: list[StoreSpec], progress=None, now_ms: int | None = None) -> list[dict]:
    """Driver side: one task a store; the results in the order the stores were given."""
    from rmqtool.spark.export import run_job

    sc = spark.sparkContext
    rdd = sc.parallelize(specs, len(specs)).map(lambda spec: verify_store_task(spec, now_ms))
    return run_job(sc, rdd, len(specs), progress, "verify: stores")
