"""``rmqtool spark verify``: ``verify`` of many stores, a store a task, as one table.

Each executor runs the one verify (verify/run.py) on its store, in one process (the
cluster gives the parallelism), and returns its findings as ``verify`` rows with the
store's name; the driver adds a summary per store.
"""
from __future__ import annotations

import pathlib

from rmqtool.spark.stores import StoreSpec


def verify_store_task(spec: StoreSpec) -> dict:
    """Executor side: the findings of one store (or why it could not be checked)."""
    import dataclasses
    import tempfile

    from rmqtool.errors import RmqError, error_line
    from rmqtool.spark import remote
    from rmqtool.verify.run import Verify, VerifyOptions

    try:
        if remote.is_uri(spec.path):  # verify reads every file: the store is staged whole
            with tempfile.TemporaryDirectory(prefix="rmqtool-stage-") as tmp:
                remote.require_store(spec.path)
                remote.stage_tree(spec.path, pathlib.Path(tmp))
                run = Verify(tmp, VerifyOptions(jobs=1))
                rename = lambda p: remote.local_name(tmp, p, spec.path) if p else p  # noqa: E731
                rows = [{"store_name": spec.name, **dataclasses.replace(f, path=rename(f.path)).to_json()}
                        for f in run.findings()]
        else:
            run = _local_verify(spec.path)
            rows = [{"store_name": spec.name, **f.to_json()} for f in run.findings()]
    except (RmqError, OSError) as exc:  # a store that cannot be checked: the error's code, as verify gives it
        line, code = error_line(exc)
        return {"store_name": spec.name, "path": spec.path, "rows": [], "error": line, "exit_code": int(code)}
    return {"store_name": spec.name, "path": spec.path, "rows": rows, "error": None, "exit_code": run.exit_code}


def _local_verify(path: str):
    """The one verify of the store's family (verify/run.py, verify/qmq/run.py), in one process."""
    from rmqtool.store.family import QMQ, detect_family
    from rmqtool.verify.run import Verify, VerifyOptions

    if detect_family(path) is QMQ:
        from rmqtool.store.qmq.view import open_qmq_store
        from rmqtool.verify.qmq.run import QmqVerify
        return QmqVerify(open_qmq_store(path), VerifyOptions(jobs=1))
    return Verify(path, VerifyOptions(jobs=1))


def summary_row(result: dict) -> dict:
    rows = result["rows"]
    count = lambda level: sum(1 for r in rows if r["severity"] == level)  # noqa: E731
    return {"record": "verify_summary", "store_name": result["store_name"], "store_path": result["path"],
            "finding_count": len(rows), "error_count": count("error"), "warning_count": count("warning"),
            "info_count": count("info"),
            "exit_code": result["exit_code"], "error": result["error"]}


def verify_fleet(spark, specs: list[StoreSpec], progress=None) -> list[dict]:
    """Driver side: one task a store; the results in the order the stores were given."""
    from rmqtool.spark.export import run_job

    sc = spark.sparkContext
    rdd = sc.parallelize(specs, len(specs)).map(verify_store_task)
    return run_job(sc, rdd, len(specs), progress, "verify: stores")
