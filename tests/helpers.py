"""Shared test helpers."""
from __future__ import annotations

import construct as cs


def roundtrip(schema: cs.Construct, data: bytes, size: int | None = None, **ctx):
    """Parse, rebuild and compare; check sizeof when the schema is fixed-size. Returns the parse."""
    obj = schema.parse(data, **ctx)
    assert schema.build(obj, **ctx) == data
    if size is not None:
        assert schema.sizeof(**ctx) == size == len(data)
    return obj
