"""The one place JSON from clients is decoded, for REST bodies and socket frames alike.

Strict and bounded: JSON nested deeper than 64 levels is invalid input (docs/protocol.md §6.5) —
the standard library's decoder would overflow the stack on 100,000 `[` and take the handler down with
it — and so is anything that is not JSON (NaN, Infinity and other extensions included).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

MAX_DEPTH = 64
_STRUCTURE = re.compile(rb'[\[\]{}"\\]')
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))


class InvalidJson(ValueError):
    """The text is not JSON, or nests too deeply; its message says which."""


def loads(data: str | bytes) -> Any:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    # Counting costs C speed; the exact depth is measured only where it could be too deep.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(raw) > MAX_DEPTH:
        raise InvalidJson(f"JSON nested deeper than {MAX_DEPTH} levels.")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidJson(str(exc)) from None


def _depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects; brackets inside strings do not count."""
    depth = deepest = 0
    in_string = False
    escaped_at = -1  # a backslash in a string escapes the character right after it
    for match in _STRUCTURE.finditer(raw):
        at = match.start()
        char = raw[at]
        if at == escaped_at:
            continue
        if in_string:
            if char == _BACKSLASH:
                escaped_at = at + 1
            elif char == _QUOTE:
                in_string = False
        elif char == _QUOTE:
            in_string = True
        elif char in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif char in _CLOSE:
            depth -= 1
    return deepest
