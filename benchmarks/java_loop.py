"""The Java anchor: benchmarks/java/RecoveryScan.java, the broker's per-record recovery work
(the totalSize hop, checkMessageAndReturnSize's field checks and properties map, the body
CRC) in a bare JVM loop, compiled into the work directory and timed in the same run as the
Python code it stands beside.
"""
from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import shutil
import subprocess
import tempfile

SOURCE = pathlib.Path(__file__).resolve().parent / "java" / "RecoveryScan.java"


@dataclasses.dataclass(frozen=True)
class JavaScan:
    messages: int
    bytes: int
    seconds: float  # measured inside the JVM: the loop only, without JVM start


def compile_loop(workdir: pathlib.Path, source: pathlib.Path = SOURCE) -> pathlib.Path:
    """javac a loop (RecoveryScan.java unless ``source`` names another) into
    ``workdir/java/<name>-<hash of the source>``; returns the class directory. Keyed by the
    source's bytes, not its time: a work directory shared by several checkouts never runs a
    class compiled from another checkout's source."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac not found: the Java anchor needs a JDK (apt install openjdk-17-jdk-headless)")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    out = pathlib.Path(workdir) / "java" / f"{source.stem}-{digest}"
    if not (out / (source.stem + ".class")).exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        building = pathlib.Path(tempfile.mkdtemp(prefix=f"{out.name}.", dir=out.parent))
        subprocess.run([javac, "-d", str(building), str(source)], check=True)
        try:
            building.rename(out)
        except OSError:  # another run compiled the same source meanwhile
            shutil.rmtree(building, ignore_errors=True)
    return out


def run_loop(classes: pathlib.Path, commitlog: pathlib.Path, main: str = "RecoveryScan",
             args: tuple[str, ...] = ()) -> JavaScan:
    """One run of a loop (``main``'s class, with ``args`` after the directory) over a log directory."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java not found: the Java anchor needs a JDK")
    done = subprocess.run([java, "-cp", str(classes), main, str(commitlog), *args],
                          check=True, capture_output=True, text=True)
    messages, size, seconds = done.stdout.split()
    return JavaScan(int(messages), int(size), float(seconds))


def best_of(classes: pathlib.Path, commitlog: pathlib.Path, rounds: int = 3, main: str = "RecoveryScan") -> JavaScan:
    runs = [run_loop(classes, commitlog, main) for _ in range(rounds)]
    return min(runs, key=lambda r: r.seconds)
