"""spark-submit's entry: spark-submit runs Python files, not console scripts, so a cluster job is

    spark-submit --master URL [--conf k=v ...] $(python -m rmqtool.cli.spark_submit --path) spark export ...

and runs the command line under the session spark-submit made (its master and settings).
"""
from __future__ import annotations

import os
import sys


def main() -> None:
    if sys.argv[1:] == ["--path"]:  # where this file is, for the spark-submit line
        from rmqtool.report.sink import write_line
        write_line(os.path.abspath(__file__))
        return
    # spark-submit puts this file's directory first on sys.path: its modules (info, query,
    # spark, ...) must not stand in for others of the same name
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    from rmqtool.cli.app import main as cli_main
    cli_main()


if __name__ == "__main__":
    main()
