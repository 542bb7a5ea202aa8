"""A message's property map and its stored string, byte for byte as the broker writes it.

The stored properties string is ``MessageDecoder.messageProperties2String`` over a Java
``HashMap``, so its order is the HashMap's iteration order (bucket of the spread key hash,
then insertion order), which depends on the table size the map grew to. :class:`PropertyMap`
keeps what that order needs.
"""
from __future__ import annotations

from typing import Iterable

from rmqtool.formats import properties as props
from rmqtool.formats.indexfile import java_string_hash

_INT32 = 0xFFFFFFFF

# --- java.util.HashMap iteration order --------------------------------------------------------

_SPREAD_CACHE: dict[str, int] = {}


def _spread_hash(name: str) -> int:
    """HashMap.hash: the key's hashCode with its high half folded into the low half."""
    h = _SPREAD_CACHE.get(name)
    if h is None:
        code = java_string_hash(name) & _INT32
        h = code ^ (code >> 16)
        if len(_SPREAD_CACHE) < 4096:
            _SPREAD_CACHE[name] = h
    return h


def hashmap_capacity(peak_size: int) -> int:
    """The table size of a default HashMap that once held ``peak_size`` entries.

    The table starts at 16 and doubles when size exceeds 0.75 x capacity; it never shrinks,
    so a map keeps the order its largest size gave it even after removals.
    """
    if peak_size <= 12:
        return 16
    capacity = 16
    while peak_size > capacity * 3 // 4:
        capacity <<= 1
    return capacity


_ORDER_CACHE: dict[tuple, tuple] = {}


def java_order(names: Iterable[str], capacity: int) -> tuple:
    """Names in HashMap iteration order: by bucket, then insertion order within a bucket.

    (Bins of more than 8 entries become trees in Java; property maps never get there.)
    """
    names = tuple(names)
    key = (names, capacity)
    order = _ORDER_CACHE.get(key)
    if order is None:
        mask = capacity - 1
        order = tuple(sorted(names, key=lambda n: _spread_hash(n) & mask))  # sort is stable
        if len(_ORDER_CACHE) < 4096:
            _ORDER_CACHE[key] = order
    return order


class PropertyMap(dict):
    """A message's property map: a dict in insertion order that also remembers the largest
    size it reached, which fixes the Java HashMap table size and so the string's order."""

    __slots__ = ("peak",)

    def __init__(self, *args, peak: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.peak = max(peak, len(self))

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        if len(self) > self.peak:
            self.peak = len(self)

    def update(self, *args, **kwargs):
        for k, v in dict(*args, **kwargs).items():
            self[k] = v

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self) -> "PropertyMap":
        return PropertyMap(self, peak=self.peak)

    @property
    def capacity(self) -> int:
        return hashmap_capacity(self.peak)

    def to_string(self) -> str:
        return properties_string(self, self.peak)


def properties_string(properties: dict, peak: int = 0) -> str:
    """MessageDecoder.messageProperties2String over a HashMap holding ``properties`` (in
    insertion order) whose largest size was ``peak``: 4.x drops the last separator."""
    if not properties:
        return ""
    size = len(properties)
    if type(properties) is PropertyMap and properties.peak > size:
        size = properties.peak
    if peak > size:
        size = peak
    names = tuple(properties)
    key = (names, size if size > 12 else 0)
    cached = _TEMPLATES.get(key)
    if cached is None:
        order = java_order(names, hashmap_capacity(size))
        template = _SEP.join(f"{n.replace('%', '%%')}{_KV}%s" for n in order)
        cached = (order, template)
        if len(_TEMPLATES) > 4096:
            _TEMPLATES.clear()
        _TEMPLATES[key] = cached
    order, template = cached
    values = tuple(map(properties.__getitem__, order))
    if None in values:  # Java skips null values
        return _SEP.join([f"{n}{_KV}{v}" for n, v in zip(order, values) if v is not None])
    return template % values


_TEMPLATES: dict[tuple, tuple] = {}
_SEP = props.PROPERTY_SEPARATOR
_KV = props.NAME_VALUE_SEPARATOR


def string_to_property_map(text: str) -> PropertyMap:
    """MessageDecoder.string2messageProperties into a map that keeps the string's order."""
    return PropertyMap(props.string_to_properties(text))
