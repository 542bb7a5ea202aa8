"""benchmarks/profile.py: the hot spots are read from the profile as cProfile recorded it: rmqtool's
functions by cumulative time (the command line's layers left out), any function by own time,
each with its share of the whole call."""
from __future__ import annotations

import cProfile
import io
import pstats
import time

from benchmarks import profile
from rmqtool.formats.properties import bytes_to_properties

RAW = b"KEYS\x01order-1\x02UNIQ_KEY\x01C0A8\x02TAGS\x01t\x02"


def test_hot_spots_are_the_profiles_top_functions_with_their_shares():
    profiler = cProfile.Profile(time.process_time)
    profiler.runcall(lambda: [bytes_to_properties(RAW) for _ in range(20_000)])
    stats = pstats.Stats(profiler, stream=io.StringIO())
    text = profile.hot_spots(stats, 5)
    cumulative, own = text.split("## top 5 by own time")
    rows = [line for line in cumulative.splitlines() if line.startswith("rmqtool/")]
    assert rows and rows[0].startswith("rmqtool/formats/properties.py:") and "(bytes_to_properties)" in rows[0]
    (ct, ct_share, tt, tt_share) = rows[0].split()[-4:]
    recorded = next(v for k, v in stats.stats.items() if k[2] == "bytes_to_properties")
    assert float(ct) == round(recorded[3], 2) and float(tt) == round(recorded[2], 2)
    assert 0 < float(ct_share.rstrip("%")) <= 100
    assert len([line for line in own.splitlines() if line and not line.startswith("function")]) == 5
    assert set(profile.PROFILES) == {"verify", "dump-jsonl", "full-decode", "crc-scan", "append", "redispatch",
                                     "qmq-verify", "timer-verify"}
