"""Validation problems as the contract's `fields` (docs/protocol.md, extensions: Errors), worded one way on
every edge: REST bodies and query parameters, socket frames, `?create=1` on a socket, cron job specs.

`fields` maps a name (a dotted path inside lists and objects: `allowed_models.1`, `schedule.cron`) to a
list of sentences: a capital first letter and a final full stop ("Unknown field.", "This field is
required.", "Must be a string."), whether DRF or pydantic found the problem. The error's `message` is the
first problem with its name ("content: This field is required."). `invalid(...)` builds that error;
REST answers it with 400 `invalid` (agentsite/errors.py), a socket with an `error` frame.

Plain Python (pydantic, no Django or DRF): cron's specs use it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from agentsite.exceptions import DomainError

NON_FIELD = "non_field_errors"  # where a problem of the whole body goes, as DRF names it

# pydantic's wording where ours says more, or where the strict DRF fields (agentsite/fields.py) and DRF say
# the same problem in other words: a string sent as a number reads alike whichever way a body is validated.
_WORDING = {
    "extra_forbidden": "Unknown field.",
    "missing": "This field is required.",
    "string_type": "Must be a string.",
    "int_type": "Must be an integer.",
    "bool_type": "Must be a valid boolean.",
    "float_type": "Must be a number.",
    "dict_type": "Must be a JSON object.",
    "model_type": "Must be a JSON object.",
    "list_type": "Must be a list.",
    "timezone_aware": "Must include a UTC offset, e.g. 2030-01-01T09:00:00Z.",
}


class InvalidInput(DomainError):
    """What a client sent cannot be taken: 400 `invalid` with `fields` (a socket: an `error` frame)."""

    code = "invalid"
    status = 400


def sentence(problem: str) -> str:
    """A problem as the `fields` word it: a capital first letter and a full stop ("must be a string" →
    "Must be a string."). A sentence that starts with a name (`my_token: …`, `day-of-month '30' …`) keeps
    the name as written: only a first word of letters alone is capitalised."""
    text = str(problem).strip().removeprefix("Value error, ")
    if not text:
        return "Invalid value."
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else f"{text}."


def summary(fields: Mapping[str, list[str]]) -> str:
    """The first problem with its name, as the error's `message`: "content: This field is required."."""
    for name, problems in fields.items():
        if problems:
            return problems[0] if name == NON_FIELD else f"{name}: {problems[0]}"
    return "Invalid input."


def worded(fields: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """A `fields` map written by hand, in the one wording."""
    return {name: [sentence(problem) for problem in problems] for name, problems in fields.items()}


def invalid(fields: Mapping[str, list[str]], *, lead: str = "") -> InvalidInput:
    """The error for `fields` (worded here): its message is `lead` (e.g. "Cannot create the session: ")
    and the first problem."""
    fields = worded(fields)
    return InvalidInput(lead + summary(fields), fields=fields)


def pydantic_fields(exc: ValidationError, *, prefix: str = "", skip: int = 0) -> dict[str, list[str]]:
    """pydantic's errors as `fields`. `prefix`: where the model sits in the body (`schedule`); `skip`: leading
    parts of each location that are not names (a tagged union's tag: a socket frame's `type`)."""
    fields: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        path = ".".join(str(part) for part in (prefix, *error["loc"][skip:]) if part != "")
        fields.setdefault(path or NON_FIELD, []).append(_pydantic_problem(error))
    return fields


def _pydantic_problem(error: ErrorDetails) -> str:
    return _WORDING.get(error["type"]) or sentence(error["msg"])


def drf_fields(detail: Any, path: str = "") -> dict[str, list[str]]:
    """DRF's validation detail (`serializer.errors`, `ValidationError.detail`) as `fields`: each problem under
    its field's name, a nested one under its dotted path (`allowed_models.0`, `env.HOME`)."""
    if isinstance(detail, Mapping):
        found: dict[str, list[str]] = {}
        for key, value in detail.items():
            found.update(drf_fields(value, f"{path}.{key}" if path else str(key)))
        return found
    if isinstance(detail, list) and any(isinstance(item, (Mapping, list)) for item in detail):
        found = {}
        for index, item in enumerate(detail):  # a list of nested objects: {} for each valid one
            found.update(drf_fields(item, f"{path}.{index}" if path else str(index)))
        return found
    problems = detail if isinstance(detail, list) else [detail]
    return {path or NON_FIELD: [sentence(problem) for problem in problems]}
