"""What a URL carries, read strictly and one way for every edge (REST, the SSE stream, a socket's connect):
integer and true/false query parameters (docs/protocol.md, extensions: the query parameters) and integer ids
in a path or query. A value that is not one is `invalid`, named in `fields` (agentsite/validation.py)."""

from __future__ import annotations

from agentsite.validation import invalid

MAX_ROW_ID = 2**63 - 1  # the largest integer primary key a database column holds


def integer_pk(raw: str) -> int | None:
    """An integer primary key written in a URL or query (`"42"`), or None when `raw` cannot be one: not ASCII
    digits (`"²"` is a digit to str.isdigit, not to int) or past what the column holds. Such an id names
    no row: callers answer 404, never 500."""
    if not (raw.isascii() and raw.isdigit()):
        return None
    value = int(raw)
    return value if value <= MAX_ROW_ID else None


FLAG_TRUE, FLAG_FALSE = ("true", "1", "yes"), ("false", "0", "no")


def query_int(raw: str, name: str, problem: str) -> int:
    """An integer query parameter (`?days=`, `?limit=`, `?since=`) written as the schema's integers are: ASCII
    digits with an optional minus. Python's int() also takes spaces, `+`, `_` and other scripts' digits; an
    empty value is no number either. Else 400 `invalid` with `problem` ("Must be …") under `name`."""
    if not (raw.isascii() and raw.removeprefix("-").isdigit()):
        raise invalid({name: [problem]})
    return int(raw)


def query_flag(raw: str | None, name: str) -> bool:
    """A true/false query parameter (`?archived=`, `?unread_only=`, `?hide=`): `true|false|1|0|yes|no` in any
    case; absent or empty is false; anything else is 400 `invalid`."""
    value = (raw or "").lower()  # not stripped: " true" is not one of the spellings (the schema's pattern)
    if value in FLAG_TRUE or value in FLAG_FALSE or value == "":
        return value in FLAG_TRUE
    raise invalid({name: ["Must be true or false."]})
