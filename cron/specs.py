"""Pydantic models for the JSON parts of a cron JOB (docs/protocol.md §2): schedule, request and dispatch.

The API validates request bodies with them and the scheduler re-parses the stored JSON columns with
them, so a job that was accepted once is read back the same way. Plain Python: no Django here.

Every model forbids unknown keys and does not coerce types (``"60"`` is not an integer, ``1`` is not a
string), because a silently reinterpreted schedule is worse than a clear 400.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Self

from cronsim import CronSim, CronSimError
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_core.core_schema import ValidationInfo

from agentsite.validation import NON_FIELD, pydantic_fields, summary, worded

__all__ = [
    "MAX_INTERVAL_SECONDS",
    "MAX_TEXT_CHARS",
    "MIN_INTERVAL_SECONDS",
    "ContentPart",
    "DispatchSpec",
    "InputMessage",
    "JobSpec",
    "RequestSpec",
    "ScheduleSpec",
    "SpecError",
    "TargetSpec",
    "check_cron",
    "check_timezone",
    "parse_job",
    "parse_spec",
    "validate_not_past",
]

# The scheduler wakes up every few seconds; shorter intervals would only pile up `skipped` runs and
# hammer the model provider. Ten seconds keeps tests and demos quick while staying sane.
MIN_INTERVAL_SECONDS = 10
# One (leap) year: anything rarer is better written as a cron string, and it keeps timedelta maths finite.
MAX_INTERVAL_SECONDS = 366 * 24 * 3600
# The same limit as a chat message's `content` (docs/protocol.md §2), since the job's input becomes one.
MAX_TEXT_CHARS = 100_000

_SESSION_ID = re.compile(r"[A-Za-z0-9:._-]{1,128}")


class SpecError(ValueError):
    """A spec that cannot be accepted; ``fields`` is the 400 body's ``fields`` map, in the wording of every
    other 400 (agentsite/validation.py), and the message its first problem."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        self.fields = worded(fields)
        super().__init__(summary(self.fields))


# --------------------------------------------------------------------------------------------------
# Cron strings and timezones
# --------------------------------------------------------------------------------------------------

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (name, lowest, highest, symbolic names, what a 400 says is allowed) in cron order.
_CRON_FIELDS: tuple[tuple[str, int, int, tuple[str, ...], str], ...] = (
    ("minute", 0, 59, (), "allowed: 0-59"),
    ("hour", 0, 23, (), "allowed: 0-23"),
    ("day-of-month", 1, 31, (), "allowed: 1-31, L or LW"),
    ("month", 1, 12, _MONTH_NAMES, "allowed: 1-12 or JAN-DEC"),
    ("day-of-week", 0, 7, _DAY_NAMES, "allowed: 0-7 with 0 and 7 for Sunday, or SUN-SAT"),
)
_FIELD_NAMES = " ".join(name for name, *_ in _CRON_FIELDS)
# A fixed, ordinary start for trial runs of an expression (not a DST day, not a leap day).
_PROBE_START = dt.datetime(2001, 1, 1, tzinfo=dt.UTC)


def check_cron(expression: str) -> str:
    """Return ``expression`` with its whitespace normalised, or raise ValueError saying what is wrong.

    Why not just cronsim's message: it says "Bad minute" but not which value or what is allowed, and a
    400 should tell the user how to fix the string. cronsim stays the judge of what is valid; this
    function only explains its verdict, field by field.
    """
    parts = expression.split()
    if len(parts) != len(_CRON_FIELDS):
        raise ValueError(_field_count_reason(parts))
    for index, token in enumerate(parts):
        probe = ["*"] * len(_CRON_FIELDS)
        probe[index] = token
        if not _cronsim_accepts(" ".join(probe)):
            raise ValueError(_token_reason(index, token))
    normalised = " ".join(parts)
    if not _cronsim_accepts(normalised):
        raise ValueError(f"day-of-month '{parts[2]}' never occurs in month '{parts[3]}'")
    if not _fires_within_years(normalised):
        raise ValueError("this schedule never fires")
    return normalised


def _field_count_reason(parts: list[str]) -> str:
    reason = f"expected 5 fields ({_FIELD_NAMES}), got {len(parts)}"
    if len(parts) == 6:
        reason += "; a seconds or year field is not supported"
    if len(parts) == 1 and parts[0].startswith("@"):
        reason += "; macros like @daily are not supported, write e.g. '0 0 * * *'"
    return reason


def _cronsim_accepts(expression: str) -> bool:
    try:
        CronSim(expression, _PROBE_START)
    except CronSimError:
        return False
    return True


def _fires_within_years(expression: str) -> bool:
    try:
        next(CronSim(expression, _PROBE_START))
    except StopIteration:
        return False
    return True


def _token_reason(index: int, token: str) -> str:
    """Explain why cronsim refused one field, as precisely as the token allows."""
    name, low, high, names, allowed = _CRON_FIELDS[index]
    prefix = f"{name} field '{token}'"
    for item in token.split(","):
        problem = _item_problem(item, low, high, names)
        if problem:
            return f"{prefix}: {problem} ({allowed})"
    return f"{prefix} is not valid ({allowed}, '*', ranges a-b, lists a,b and steps */n)"


def _item_problem(item: str, low: int, high: int, names: tuple[str, ...]) -> str | None:
    """The first concrete problem in one comma-separated item, or None when none is obvious."""
    if item == "":
        return "empty list item"
    base, has_step, step = item.partition("/")
    if has_step:
        if not _is_number(step):
            return f"step '{step}' is not a whole number"
        if int(step) == 0:
            return "a step must be at least 1"
    bounds = base.split("-")
    for bound in bounds:
        problem = _bound_problem(bound, low, high, names)
        if problem:
            return problem
    if len(bounds) == 2 and all(_is_number(bound) for bound in bounds) and int(bounds[0]) > int(bounds[1]):
        return f"range {base} runs backwards"
    return None


def _is_number(text: str) -> bool:
    """ASCII digits only: `"²"` is a digit to str.isdigit, not to int."""
    return text.isascii() and text.isdigit()


def _bound_problem(bound: str, low: int, high: int, names: tuple[str, ...]) -> str | None:
    if bound == "*" or bound.upper() in names:
        return None
    if _is_number(bound):
        value = int(bound)
        return None if low <= value <= high else f"{value} is out of range"
    if bound == "":
        return "missing number"
    return f"'{bound}' is not a number" + (" or a name" if names else "")


def check_timezone(name: str) -> str:
    """Return ``name`` if it is a known IANA timezone, else raise ValueError with a helpful reason."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"unknown timezone '{name}'; use an IANA name such as 'Europe/Berlin' or 'UTC'"
        ) from None
    return name


# --------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------


class _Spec(BaseModel):
    """Common configuration: unknown keys are errors, no type coercion, immutable once parsed."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _reject(code: str, message: str) -> PydanticCustomError:
    return PydanticCustomError(code, message)


class ScheduleSpec(_Spec):
    """When a job runs. Exactly the field of its ``type`` is set (others absent or null).

    - ``cron``: 5 fields, read in ``timezone`` (see cron/schedule.py for the DST rule);
    - ``interval``: ``every_seconds`` (MIN_INTERVAL_SECONDS..MAX_INTERVAL_SECONDS), fixed rate from the
      job's creation, ``timezone`` is irrelevant;
    - ``once``: ``run_at``, an ISO 8601 datetime with an offset, stored in UTC.
    """

    type: Literal["cron", "interval", "once"]
    cron: str | None = Field(default=None, validate_default=True)
    every_seconds: int | None = Field(default=None, validate_default=True)
    # Datetimes arrive as ISO strings in a parsed JSON body, so this one field parses leniently.
    run_at: AwareDatetime | None = Field(default=None, validate_default=True, strict=False)
    timezone: str = "UTC"

    @field_validator("cron", "every_seconds", "run_at")
    @classmethod
    def _present_only_for_its_type(cls, value: Any, info: ValidationInfo) -> Any:
        owner = {"cron": "cron", "every_seconds": "interval", "run_at": "once"}[str(info.field_name)]
        kind = info.data.get("type")
        if kind is None:  # `type` itself is invalid: that error says enough.
            return value
        if kind == owner and value is None:
            raise _reject("required", f"this field is required when type is '{owner}'")
        if kind != owner and value is not None:
            raise _reject("not_allowed", f"only allowed when type is '{owner}' (type is '{kind}')")
        return value

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_cron(value)
        except ValueError as exc:
            raise _reject("invalid_cron", str(exc)) from None

    @field_validator("every_seconds")
    @classmethod
    def _sane_interval(cls, value: int | None) -> int | None:
        if value is not None and not MIN_INTERVAL_SECONDS <= value <= MAX_INTERVAL_SECONDS:
            raise _reject(
                "out_of_range",
                f"must be between {MIN_INTERVAL_SECONDS} and {MAX_INTERVAL_SECONDS} seconds",
            )
        return value

    @field_validator("run_at")
    @classmethod
    def _in_utc(cls, value: dt.datetime | None) -> dt.datetime | None:
        return None if value is None else value.astimezone(dt.UTC)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            return check_timezone(value)
        except ValueError as exc:
            raise _reject("unknown_timezone", str(exc)) from None

    def to_json(self) -> dict[str, Any]:
        """The wire/storage form: only the fields of this type, ``run_at`` as ISO 8601 UTC."""
        return self.model_dump(mode="json", exclude_none=True)


class ContentPart(_Spec):
    """One piece of a message's content; only text for now."""

    type: Literal["text"] = "text"
    text: str


class InputMessage(_Spec):
    """One input item, in the Responses-API-like shape docs/protocol.md §2 uses."""

    role: Literal["user"] = "user"
    type: Literal["message"] = "message"
    content: list[ContentPart] = Field(min_length=1)


class RequestSpec(_Spec):
    """What an ``agent`` job sends to its session, as if the user typed it."""

    input: list[InputMessage] = Field(min_length=1)

    @field_validator("input")
    @classmethod
    def _has_text(cls, value: list[InputMessage]) -> list[InputMessage]:
        texts = [part.text for message in value for part in message.content]
        if not any(text.strip() for text in texts):
            raise _reject("empty", "at least one non-empty text is required")
        if len(_join(texts)) > MAX_TEXT_CHARS:
            raise _reject("too_long", f"the text is longer than {MAX_TEXT_CHARS} characters")
        return value

    def text(self) -> str:
        """The message content the job queues: the non-empty texts, separated by a blank line."""
        return _join(part.text for message in self.input for part in message.content)

    @classmethod
    def from_text(cls, text: str) -> Self:
        """The request for one plain text, e.g. from a portal form with a single text box."""
        return cls.model_validate({"input": [{"content": [{"text": text}]}]})


def _join(texts: Iterable[str]) -> str:
    return "\n\n".join(text for text in texts if text.strip())


class TargetSpec(_Spec):
    """The chat session a job delivers into; ``user_id``, when given, must be the job's owner (API check)."""

    user_id: str | None = None
    session_id: str

    @field_validator("session_id")
    @classmethod
    def _session_id_shape(cls, value: str) -> str:
        if not _SESSION_ID.fullmatch(value):
            raise _reject("invalid_session_id", "must be 1-128 characters of A-Z a-z 0-9 : . _ -")
        return value


class DispatchSpec(_Spec):
    """Where a job's run goes: the console channel = a chat session of the job's owner."""

    type: Literal["channel"] = "channel"
    channel: Literal["console"] = "console"
    target: TargetSpec
    mode: Literal["stream", "final"] = "stream"


def parse_spec[SpecT: BaseModel](model: type[SpecT], data: Any, *, prefix: str = "") -> SpecT:
    """Validate ``data`` (parsed JSON) as ``model``; on failure raise SpecError with the fields map.

    Why a wrapper: API, admin and scheduler then share one error shape (agentsite/validation.py: the
    one every edge answers with) and never see pydantic's.
    """
    if not isinstance(data, Mapping):
        raise SpecError({prefix or NON_FIELD: ["must be a JSON object"]})
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SpecError(pydantic_fields(exc, prefix=prefix)) from None


def validate_not_past(spec: ScheduleSpec, now: dt.datetime, *, prefix: str = "schedule") -> None:
    """Refuse a ``once`` schedule whose ``run_at`` is not after ``now`` (it would never fire).

    Kept out of the model because it needs "now": a stored job read back later must still parse.
    """
    if spec.type != "once" or spec.run_at is None or spec.run_at > now:
        return
    path = f"{prefix}.run_at" if prefix else "run_at"
    raise SpecError(
        {path: [f"This time is in the past ({spec.run_at.isoformat()} is not after {now.isoformat()})."]}
    )


# --------------------------------------------------------------------------------------------------
# A whole JOB body
# --------------------------------------------------------------------------------------------------

MAX_TIMEOUT_SECONDS = 24 * 3600
# Keys of a JOB the server sets: a client may send them back (GET, edit, PUT) and they are ignored.
READ_ONLY_JOB_KEYS = frozenset(
    {"id", "next_run_at", "last_run_at", "last_status", "created_at", "updated_at"}
)


def _accepts_read_only_keys(schema: dict[str, Any]) -> None:
    """The OpenAPI document says what `parse_job` does: a JOB read with GET may be sent back as it is, its
    read-only keys accepted and ignored."""
    properties = schema.setdefault("properties", {})
    for key in sorted(READ_ONLY_JOB_KEYS):
        properties.setdefault(key, {"description": "Read-only: accepted and ignored."})


class JobSpec(_Spec):
    """The writable part of a JOB (docs/protocol.md §2), before the checks that need the database."""

    model_config = ConfigDict(**_Spec.model_config, json_schema_extra=_accepts_read_only_keys)

    name: str = Field(min_length=1, max_length=200)
    enabled: bool = True
    agent: str = Field(default="default", min_length=1, max_length=64)
    schedule: ScheduleSpec
    task_type: Literal["agent", "text"] = "agent"
    request: RequestSpec | None = None
    text: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    dispatch: DispatchSpec
    save_result_to_inbox: bool = True
    timeout_seconds: int = Field(default=600, ge=1, le=MAX_TIMEOUT_SECONDS)

    def content(self) -> str:
        """What a run delivers: the request's text (agent jobs) or the text (text jobs)."""
        if self.task_type == "agent":
            return self.request.text() if self.request is not None else ""
        return self.text or ""


def parse_job(data: Any) -> JobSpec:
    """Validate a JOB body (read-only keys dropped), including the rules that tie fields together.

    An agent job needs ``request.input``, a text job a non-empty ``text``; the other one may be absent
    or null (a JOB read back carries both keys).
    """
    if isinstance(data, Mapping):
        data = {key: value for key, value in data.items() if key not in READ_ONLY_JOB_KEYS}
    job = parse_spec(JobSpec, data)
    if job.task_type == "agent" and job.request is None:
        raise SpecError({"request.input": ["this field is required for an agent job"]})
    if job.task_type == "text" and not (job.text or "").strip():
        raise SpecError({"text": ["a non-empty text is required for a text job"]})
    return job
