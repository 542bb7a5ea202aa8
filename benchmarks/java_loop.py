"""The Java anchor: benchmarks/java/RecoveryScan.java, the broker's per-record recovery work
(the totalSize hop, checkMessageAndReturnSize's field checks and properties map, the body
CRC) in a bare JVM loop, compiled into the work directory and timed in the same run as the
Python code it stands beside.
"""
from __future__ import annotations

import dataclasses
import pathlib
import shutil
import subprocess

SOURCE = pathlib.Path(__file__).resolve().parent / "java" / "RecoveryScan.java"


@dataclasses.dataclass(frozen=True)
class JavaScan:
    messages: int
    bytes: int
    seconds: float  # measured inside the JVM: the loop only, without JVM start


def compile_loop(workdir: pathlib.Path, source: pathlib.Path = SOURCE) -> pathlib.Path:
    """javac a loop (RecoveryScan.java unless ``source`` names another) into ``workdir/java``;
    returns the class directory."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac not found: the Java anchor needs a JDK (apt install openjdk-17-jdk-headless)")
    out = pathlib.Path(workdir) / "java"
    out.mkdir(parents=True, exist_ok=True)
    target = out / (source.stem + ".class")
    if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
        subprocess.run([javac, "-d", str(out), str(source)], check=True)
    return out


def run_loop(classes: pathlib.Path, commitlog: pathlib.Path, main: str = "RecoveryScan") -> JavaScan:
    """One run of a loop (``main``'s class) over a log directory."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java not found: the Java anchor needs a JDK")
    done = subprocess.run([java, "-cp", str(classes), main, str(commitlog)],
                          check=True, capture_output=True, text=True)
    messages, size, seconds = done.stdout.split()
    return JavaScan(int(messages), int(size), float(seconds))


def best_of(classes: pathlib.Path, commitlog: pathlib.Path, rounds: int = 3, main: str = "RecoveryScan") -> JavaScan:
    runs = [run_loop(classes, commitlog, main) for _ in range(rounds)]
    return min(runs, key=lambda r: r.seconds)
