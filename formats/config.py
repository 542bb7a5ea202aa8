r"""The broker's ``config/*.json`` files: fastjson text with unquoted integer keys.

Mirrors ``common/src/main/java/org/apache/rocketmq/common/ConfigManager.java`` (load,
loadBak, persist), ``MixAll.string2File`` and
``remoting/.../protocol/RemotingSerializable.java`` (``toJson(obj, prettyFormat)`` =
fastjson ``JSON.toJSONString(obj, true)``), at 4.9.8 and 5.3.3. Pure text in, text out:
no file I/O here (rmqtool.store.config reads the files).

What fastjson writes, and what :func:`dumps_fastjson` reproduces::

    {                                         <- a map or bean: "{", then per entry:
    \t"offsetTable":{                         <-   String key: newline + tabs, "key":
    \t\t"TopicTest@group_a":{0:250,1:250      <-   Integer key: no newline, unquoted key:
    \t\t},                                    <-   "}" after newline + tabs (when not empty)
    \t\t"%RETRY%group_a@group_a":{0:0
    \t\t}
    \t}
    }

    Lists of two or more items break one item per line; shorter lists and empty
    containers stay on one line ([x], [], {}). Fields with null values are left out.
    Strings are double-quoted; '"', '\' and control characters are escaped. (A Java
    Set is written on one line whatever its size; Python lists are written as Lists.)

Persisting (4.9.8 string2File) writes ``<name>.tmp``, copies the old content to
``<name>.bak``, deletes ``<name>`` and renames the .tmp; 5.3.3 copies to .bak and
rewrites in place. Loading reads ``<name>`` and, when it is missing, empty or does
not parse, ``<name>.bak`` (ConfigManager.load / loadBak).
"""
from __future__ import annotations

import dataclasses
import re

from rmqtool.errors import FormatError

BAK_SUFFIX = ".bak"
TMP_SUFFIX = ".tmp"
TOPIC_GROUP_SEPARATOR = "@"  # consumerOffset.json keys are "topic@group"


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigFileSpec:
    name: str
    manager: str  # the Java class that loads and persists it
    tables: tuple[str, ...]  # top-level keys holding its data
    description: str


KNOWN_CONFIG_FILES: dict[str, ConfigFileSpec] = {spec.name: spec for spec in (
    ConfigFileSpec("topics.json", "TopicConfigManager", ("topicConfigTable", "dataVersion"),
                   "topicConfigTable: topic -> TopicConfig (topicName, readQueueNums, writeQueueNums, perm, "
                   "topicFilterType, topicSysFlag, order; 5.x attributes); dataVersion: {counter, timestamp}"),
    ConfigFileSpec("consumerOffset.json", "ConsumerOffsetManager", ("offsetTable",),
                   'offsetTable: "topic@group" -> {queueId: committed consumer offset}; 5.x adds dataVersion'),
    ConfigFileSpec("delayOffset.json", "ScheduleMessageService", ("offsetTable",),
                   "offsetTable: delayLevel (1..18) -> next offset to deliver in SCHEDULE_TOPIC_XXXX queue "
                   "delayLevel - 1; 5.x adds dataVersion"),
    ConfigFileSpec("subscriptionGroup.json", "SubscriptionGroupManager", ("subscriptionGroupTable", "dataVersion"),
                   "subscriptionGroupTable: group -> SubscriptionGroupConfig; 5.x adds forbiddenTable"),
    ConfigFileSpec("consumerFilter.json", "ConsumerFilterManager", ("filterDataByTopic",),
                   "filterDataByTopic: topic -> expression filter data per group"),
    ConfigFileSpec("topicQueueMapping.json", "TopicQueueMappingManager",
                   ("topicQueueMappingInfoMap", "dataVersion"),
                   "5.x static topics: topic -> queue mapping detail"),
    ConfigFileSpec("consumerOrderInfo.json", "ConsumerOrderInfoManager", ("table",),
                   "5.x pop orderly consumption state"),
    ConfigFileSpec("messageRequestMode.json", "MessageRequestModeManager", ("messageRequestModeMap",),
                   "5.x pull/pop mode per topic and group"),
)}


# --- parsing ---------------------------------------------------------------------------

_WHITESPACE = " \t\n\r\f\b"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "'": "'", "b": "\b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t", "v": "\v", "0": "\0"}
_MAX_DEPTH = 200  # far deeper than any broker file; keeps hostile input from exhausting the stack


def _is_ident_start(ch: str) -> bool:
    return len(ch) == 1 and (ch.isalpha() or ch in "_$")


class _Parser:
    """Recursive descent over the text, with fastjson's default leniency: unquoted keys,
    single-quoted strings, stray commas."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, message: str, pos: int | None = None):
        pos = self.pos if pos is None else pos
        raise FormatError(f"not fastjson: {message} at character {pos}", offset=pos)

    def skip_ws(self):
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        self.pos = pos

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def document(self):
        if not self.peek():
            self.fail("empty text")
        value = self.value()
        if self.peek():
            self.fail("text after the end of the document")
        return value

    def value(self):
        ch = self.peek()
        if not ch:
            self.fail("unexpected end of text")
        if ch == "{":
            return self.container(self.object)
        if ch == "[":
            return self.container(self.array)
        if ch in "\"'":
            return self.string()
        if ch == "-" or ch.isdigit():
            return self.number()
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val
        self.fail(f"unexpected {ch!r}")

    def container(self, parse):
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.fail("nesting too deep")
        result = parse()
        self.depth -= 1
        return result

    def object(self) -> dict:
        self.pos += 1  # "{"
        result: dict = {}
        while True:
            ch = self.peek()
            if not ch:
                self.fail("unterminated object")
            if ch == ",":  # fastjson allows stray commas
                self.pos += 1
                continue
            if ch == "}":
                self.pos += 1
                return result
            key = self.key()
            if self.peek() != ":":
                self.fail("expected ':' after a key")
            self.pos += 1
            result[key] = self.value()
            ch = self.peek()
            if ch not in ",}":
                self.fail("expected ',' or '}' in an object")

    def array(self) -> list:
        self.pos += 1  # "["
        result: list = []
        while True:
            ch = self.peek()
            if not ch:
                self.fail("unterminated array")
            if ch == ",":
                self.pos += 1
                continue
            if ch == "]":
                self.pos += 1
                return result
            result.append(self.value())
            ch = self.peek()
            if ch not in ",]":
                self.fail("expected ',' or ']' in an array")

    def key(self):
        """A quoted key is a str; an unquoted integer key (Map<Integer, ..>) an int."""
        ch = self.peek()  # never empty: object() checked
        if ch in "\"'":
            return self.string()
        if ch == "-" or ch.isdigit():
            start = self.pos
            key = self.number()
            if not isinstance(key, int):
                self.fail("a non-integer number as a key", start)
            return key
        if _is_ident_start(ch):
            start = self.pos
            while self.pos < len(self.text) and (_is_ident_start(self.text[self.pos])
                                                 or self.text[self.pos].isdigit()):
                self.pos += 1
            return self.text[start:self.pos]
        self.fail(f"unexpected {ch!r} where a key should be")

    def number(self):
        text, start = self.text, self.pos
        pos = start + 1 if text[start] == "-" else start
        digits_start = pos
        while pos < len(text) and text[pos].isdigit():
            pos += 1
        if pos == digits_start:
            self.fail("a '-' without digits", start)
        is_float = False
        if pos < len(text) and text[pos] == ".":
            is_float = True
            pos += 1
            while pos < len(text) and text[pos].isdigit():
                pos += 1
        if pos < len(text) and text[pos] in "eE":
            is_float = True
            pos += 1
            if pos < len(text) and text[pos] in "+-":
                pos += 1
            while pos < len(text) and text[pos].isdigit():
                pos += 1
        self.pos = pos
        token = text[start:pos]
        try:
            return float(token) if is_float else int(token)
        except ValueError:
            self.fail(f"bad number {token!r}", start)

    def string(self) -> str:
        text = self.text
        quote = text[self.pos]
        start = self.pos
        pos = self.pos + 1
        parts: list[str] = []
        run = pos
        while True:
            if pos >= len(text):
                self.fail("unterminated string", start)
            ch = text[pos]
            if ch == quote:
                parts.append(text[run:pos])
                self.pos = pos + 1
                return _join_utf16("".join(parts))
            if ch != "\\":
                pos += 1
                continue
            parts.append(text[run:pos])
            if pos + 1 >= len(text):
                self.fail("unterminated string", start)
            esc = text[pos + 1]
            if esc == "u":
                hex_digits = text[pos + 2:pos + 6]
                if len(hex_digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in hex_digits):
                    self.fail("bad \\u escape", pos)
                parts.append(chr(int(hex_digits, 16)))
                pos += 6
            elif esc == "x":
                hex_digits = text[pos + 2:pos + 4]
                if len(hex_digits) != 2 or not all(c in "0123456789abcdefABCDEF" for c in hex_digits):
                    self.fail("bad \\x escape", pos)
                parts.append(chr(int(hex_digits, 16)))
                pos += 4
            elif esc in _ESCAPES:
                parts.append(_ESCAPES[esc])
                pos += 2
            else:
                self.fail(f"bad escape \\{esc}", pos)
            run = pos


def _join_utf16(s: str) -> str:
    """Pair up surrogates written as two \\u escapes (Java strings are UTF-16)."""
    if not any("\ud800" <= c <= "\udfff" for c in s):
        return s
    try:
        return s.encode("utf-16-be", "surrogatepass").decode("utf-16-be")
    except UnicodeDecodeError:
        return s  # a lone surrogate: keep it as Java would


def loads_fastjson(text: str):
    """Parse fastjson text: objects become dicts (unquoted integer keys as ints), arrays
    lists. Raises FormatError (offset = character position) when the text does not parse."""
    return _Parser(text).document()


# --- writing ---------------------------------------------------------------------------

def _escape_char(ch: str) -> str:
    if ch in '"\\':
        return "\\" + ch
    short = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}.get(ch)
    if short:
        return short
    code = ord(ch)
    if code < 0x20 or 0x7F <= code < 0xA0:
        return f"\\u{code:04X}"
    return ch


def _quote(s: str) -> str:
    return '"' + "".join(_escape_char(c) for c in s) + '"'


class _Writer:
    def __init__(self, pretty: bool):
        self.pretty = pretty
        self.indent = 0
        self.out: list[str] = []

    def println(self):
        if self.pretty:
            self.out.append("\n" + "\t" * self.indent)

    def write(self, obj):
        out = self.out
        if obj is None:
            out.append("null")
        elif obj is True:
            out.append("true")
        elif obj is False:
            out.append("false")
        elif isinstance(obj, int):
            out.append(str(obj))
        elif isinstance(obj, float):
            out.append(repr(obj))
        elif isinstance(obj, str):
            out.append(_quote(obj))
        elif isinstance(obj, dict):
            self.write_map(obj)
        elif isinstance(obj, (list, tuple)):
            self.write_list(obj)
        else:
            raise TypeError(f"cannot write {type(obj).__name__} as fastjson")

    def write_map(self, obj: dict):
        # MapSerializer: a newline before each String key only; one before "}" if the map
        # is not empty (counting the null values it left out, as fastjson does).
        self.out.append("{")
        self.indent += 1
        first = True
        for key, value in obj.items():
            if value is None:
                continue  # MapSerializer leaves out null values (no WriteMapNullValue)
            if not first:
                self.out.append(",")
            first = False
            if isinstance(key, str):
                self.println()
                self.out.append(_quote(key))
            elif isinstance(key, int) and not isinstance(key, bool):
                self.out.append(str(key))
            else:
                raise TypeError(f"cannot write a {type(key).__name__} key as fastjson")
            self.out.append(":")
            self.write(value)
        self.indent -= 1
        if obj:
            self.println()
        self.out.append("}")

    def write_list(self, obj):
        # ListSerializer: one item per line only for two or more items.
        if len(obj) > 1 and self.pretty:
            self.out.append("[")
            self.indent += 1
            for i, item in enumerate(obj):
                if i:
                    self.out.append(",")
                self.println()
                self.write(item)
            self.indent -= 1
            self.println()
            self.out.append("]")
            return
        self.out.append("[")
        for i, item in enumerate(obj):
            if i:
                self.out.append(",")
            self.write(item)
        self.out.append("]")


def dumps_fastjson(obj, pretty: bool = True) -> str:
    """fastjson's JSON.toJSONString(obj, pretty) for dicts/lists/scalars; int keys unquoted."""
    writer = _Writer(pretty)
    writer.write(obj)
    return "".join(writer.out)


# --- reading the known tables ------------------------------------------------------------

def topic_group(key) -> tuple[str, str] | None:
    """A consumerOffset.json key as ConsumerOffsetManager splits "topic@group"; None for a key
    without '@' (fastjson loads it, and no lookup by topic and group ever finds it)."""
    if not isinstance(key, str):
        return None
    topic, sep, group = key.partition(TOPIC_GROUP_SEPARATOR)
    return (topic, group) if sep else None


INTEGER_BITS = 32  # a Java Integer's (a queue id's)
_LONG_BITS = 64
_JAVA_DIGITS = re.compile(r"[+-]?\d+\Z")


def fastjson_number(value, bits: int = _LONG_BITS) -> int | None:
    """``value`` as fastjson 1.2.69 casts it into a map's Integer (32 bits) or Long (64) key or
    value; None where the cast throws, and with it the manager's whole decode.

    A JSON number, a float cut toward zero, or a string of decimal digits (an optional sign,
    ',' ignored) inside the type's range. A boolean throws (1.2.83, on 5.x brokers, reads it as
    1 or 0: a broker never writes one); null, objects and lists throw.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        value = int(value)
    elif isinstance(value, str):
        text = value.replace(",", "")
        if not _JAVA_DIGITS.match(text):
            return None
        value = int(text)
    elif not isinstance(value, int):
        return None
    limit = 1 << (bits - 1)
    return value if -limit <= value < limit else None


def _number_map(table: dict, where: str) -> dict[int, int]:
    """A Map<Integer, Long> as fastjson loads it; FormatError (why it throws) otherwise."""
    loaded = {}
    for raw_key, raw_value in table.items():
        key, value = fastjson_number(raw_key, INTEGER_BITS), fastjson_number(raw_value)
        if key is None:
            raise FormatError(f"{where}: key {raw_key!r} is not an Integer")
        if value is None:
            raise FormatError(f"{where}: {raw_key!r}: {raw_value!r} is not a Long")
        loaded[key] = value
    return loaded


def _wrapper(doc, name: str):
    """The document's ``name`` field as fastjson binds a wrapper class: None when fastjson
    gives no object (a list or null document) or the field is absent; FormatError where it
    throws (a number, string or boolean where an object goes)."""
    if doc is None or isinstance(doc, list):
        return None
    if not isinstance(doc, dict):
        raise FormatError("the document is not an object")
    return doc.get(name)


def consumer_offsets(doc) -> dict[str, dict[int, int]] | None:
    """consumerOffset.json as ConsumerOffsetManager.decode loads it: "topic@group" -> {queueId:
    offset}, fastjson's casts applied (:func:`fastjson_number`). None when it loads no table (a
    null or absent offsetTable); FormatError (why) where the decode throws: ConfigManager.load
    then loads the .bak."""
    table = _wrapper(doc, "offsetTable")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise FormatError("offsetTable is not an object")
    result = {}
    for key, queues in table.items():
        if not isinstance(key, str):  # fastjson: "illegal identifier" for a bare number as a String key
            raise FormatError(f"offsetTable key {key!r} is not a string")
        if not isinstance(queues, dict):
            raise FormatError(f"offsetTable[{key!r}] is not an object")
        result[key] = _number_map(queues, f"offsetTable[{key!r}]")
    return result


def delay_offsets(doc) -> dict[int, int]:
    """delayOffset.json as ScheduleMessageService.decode loads it: delayLevel -> offset. An
    absent offsetTable is the wrapper's empty one; FormatError (why) where the decode throws
    (a null one too: putAll(null))."""
    table = _wrapper(doc, "offsetTable")
    if table is None and not (isinstance(doc, dict) and "offsetTable" in doc):
        return {}  # no object bound, or the field absent: the wrapper's own empty table
    if not isinstance(table, dict):
        raise FormatError("offsetTable is null" if table is None else "offsetTable is not an object")
    return _number_map(table, "offsetTable")


# the managers whose decode rmqtool follows: a document they throw on is broken, as one that
# does not parse is (ConfigManager.load catches both and loads the .bak)
_DECODERS = {"consumerOffset.json": consumer_offsets, "delayOffset.json": delay_offsets}


def decode_refusal(name: str, doc) -> str | None:
    """Why the broker's decode of config file ``name`` throws on ``doc``; None when it loads it
    (or rmqtool does not follow that file's decode)."""
    decoder = _DECODERS.get(name)
    if decoder is None:
        return None
    try:
        decoder(doc)
    except FormatError as exc:
        return exc.message
    return None
