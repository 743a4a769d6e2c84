"""Job spec validation: schedule, request and dispatch models, and their errors in the API's shape."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from agentsite.validation import pydantic_fields
from cron.specs import (
    MAX_TEXT_CHARS,
    MIN_INTERVAL_SECONDS,
    DispatchSpec,
    RequestSpec,
    ScheduleSpec,
    SpecError,
    check_cron,
    parse_spec,
    validate_not_past,
)


def schedule_errors(data: Any) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(ScheduleSpec, data, prefix="schedule")
    return caught.value.fields


def request_errors(data: Any) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(RequestSpec, data, prefix="request")
    return caught.value.fields


def dispatch_errors(data: Any) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        parse_spec(DispatchSpec, data, prefix="dispatch")
    return caught.value.fields


def request_body(*texts: str) -> dict[str, Any]:
    return {
        "input": [
            {"role": "user", "type": "message", "content": [{"type": "text", "text": t} for t in texts]}
        ]
    }


# --- cron strings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "0 8 * * 1-5",
        "*/15 * * * *",
        "0 0 1 1 *",
        "0 9 * * mon-fri",
        "30 2 L * *",
        "0 0 29 2 *",
        "5,35 */2 * JAN-JUN 0",
    ],
)
def test_valid_cron_strings_are_accepted(expression: str) -> None:
    spec = parse_spec(ScheduleSpec, {"type": "cron", "cron": expression})

    assert spec.cron == expression


def test_cron_whitespace_is_normalised() -> None:
    assert check_cron("  0   8 * *\t1-5 ") == "0 8 * * 1-5"


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("0 0 8 * * 1-5", "Expected 5 fields (minute hour day-of-month month day-of-week), got 6"),
        ("garbage", "Expected 5 fields (minute hour day-of-month month day-of-week), got 1"),
        ("@daily", "macros like @daily are not supported"),
        ("61 * * * *", "Minute field '61': 61 is out of range (allowed: 0-59)"),
        ("0 24 * * *", "Hour field '24': 24 is out of range (allowed: 0-23)"),
        ("1-60/5 * * * *", "Minute field '1-60/5': 60 is out of range"),
        ("0 0 * 13 *", "Month field '13': 13 is out of range (allowed: 1-12 or JAN-DEC)"),
        ("0 0 * * 8", "day-of-week field '8': 8 is out of range"),
        ("x y z w v", "Minute field 'x': 'x' is not a number"),
        ("0 0 * * FOO", "day-of-week field 'FOO': 'FOO' is not a number or a name"),
        ("*/0 * * * *", "Minute field '*/0': a step must be at least 1"),
        ("5-3 * * * *", "Minute field '5-3': range 5-3 runs backwards"),
        ("1,,2 * * * *", "Minute field '1,,2': empty list item"),
        ("0 0 30 2 *", "day-of-month '30' never occurs in month '2'"),
    ],
)
def test_invalid_cron_string_is_refused_with_its_reason(expression: str, reason: str) -> None:
    errors = schedule_errors({"type": "cron", "cron": expression})

    assert list(errors) == ["schedule.cron"]
    assert reason in errors["schedule.cron"][0]


# --- schedule types and timezones ------------------------------------------------------------------


def test_unknown_timezone_is_refused_with_a_hint() -> None:
    errors = schedule_errors({"type": "cron", "cron": "0 8 * * *", "timezone": "Mars/Olympus_Mons"})

    assert errors == {
        "schedule.timezone": [
            "Unknown timezone 'Mars/Olympus_Mons'; use an IANA name such as 'Europe/Berlin' or 'UTC'."
        ]
    }


@pytest.mark.parametrize("name", ["", "../../etc/passwd", "/usr/share/zoneinfo/UTC"])
def test_timezone_that_is_not_an_iana_name_is_refused(name: str) -> None:
    assert "schedule.timezone" in schedule_errors({"type": "cron", "cron": "0 8 * * *", "timezone": name})


def test_timezone_defaults_to_utc() -> None:
    assert parse_spec(ScheduleSpec, {"type": "interval", "every_seconds": 60}).timezone == "UTC"


def test_field_of_the_type_is_required() -> None:
    assert schedule_errors({"type": "interval"}) == {
        "schedule.every_seconds": ["This field is required when type is 'interval'."]
    }


def test_field_of_another_type_is_refused_but_null_is_allowed() -> None:
    errors = schedule_errors({"type": "cron", "cron": "0 8 * * *", "every_seconds": 60})
    spec = parse_spec(
        ScheduleSpec, {"type": "cron", "cron": "0 8 * * *", "every_seconds": None, "run_at": None}
    )

    assert errors == {"schedule.every_seconds": ["Only allowed when type is 'interval' (type is 'cron')."]}
    assert spec.every_seconds is None


def test_unknown_schedule_type_is_refused() -> None:
    assert schedule_errors({"type": "weekly"}) == {
        "schedule.type": ["Input should be 'cron', 'interval' or 'once'."]
    }


@pytest.mark.parametrize("seconds", [MIN_INTERVAL_SECONDS - 1, 0, -60, 10**12])
def test_interval_outside_its_bounds_is_refused(seconds: int) -> None:
    errors = schedule_errors({"type": "interval", "every_seconds": seconds})

    assert errors["schedule.every_seconds"][0].startswith(f"Must be between {MIN_INTERVAL_SECONDS} and ")


@pytest.mark.parametrize("value", ["60", 60.0, True])
def test_interval_is_not_coerced_from_other_types(value: Any) -> None:
    assert schedule_errors({"type": "interval", "every_seconds": value}) == {
        "schedule.every_seconds": ["Must be an integer."]
    }


def test_unknown_key_is_refused() -> None:
    assert schedule_errors({"type": "interval", "every_seconds": 60, "jitter": 5}) == {
        "schedule.jitter": ["Unknown field."]
    }


def test_run_at_with_offset_is_stored_in_utc() -> None:
    spec = parse_spec(
        ScheduleSpec, {"type": "once", "run_at": "2030-07-01T08:30:00+02:00", "timezone": "Europe/Berlin"}
    )

    assert spec.run_at == dt.datetime(2030, 7, 1, 6, 30, tzinfo=dt.UTC)
    assert spec.to_json() == {"type": "once", "run_at": "2030-07-01T06:30:00Z", "timezone": "Europe/Berlin"}


def test_run_at_without_offset_is_refused() -> None:
    assert schedule_errors({"type": "once", "run_at": "2030-07-01T08:30:00"}) == {
        "schedule.run_at": ["Must include a UTC offset, e.g. 2030-01-01T09:00:00Z."]
    }


def test_schedule_that_is_not_an_object_is_refused() -> None:
    assert schedule_errors("0 8 * * *") == {"schedule": ["Must be a JSON object."]}


def test_stored_schedule_round_trips_through_to_json() -> None:
    data = {"type": "cron", "cron": "0 8 * * 1-5", "timezone": "Europe/Berlin"}

    assert parse_spec(ScheduleSpec, parse_spec(ScheduleSpec, data).to_json()).to_json() == data


# --- once in the past ------------------------------------------------------------------------------

NOW = dt.datetime(2030, 1, 1, 12, tzinfo=dt.UTC)


@pytest.mark.parametrize("run_at", [NOW, NOW - dt.timedelta(seconds=1)])
def test_once_at_or_before_now_is_refused(run_at: dt.datetime) -> None:
    spec = ScheduleSpec(type="once", run_at=run_at)

    with pytest.raises(SpecError) as caught:
        validate_not_past(spec, NOW)

    assert list(caught.value.fields) == ["schedule.run_at"]
    assert caught.value.fields["schedule.run_at"][0].startswith("This time is in the past")


def test_once_in_the_future_and_other_types_pass_the_past_check() -> None:
    validate_not_past(ScheduleSpec(type="once", run_at=NOW + dt.timedelta(seconds=1)), NOW)
    validate_not_past(ScheduleSpec(type="cron", cron="0 0 1 1 *"), NOW)


# --- request ---------------------------------------------------------------------------------------


def test_request_text_joins_the_non_empty_texts() -> None:
    spec = parse_spec(RequestSpec, request_body("Summarise the news.", "  ", "Keep it short."))

    assert spec.text() == "Summarise the news.\n\nKeep it short."


def test_request_role_type_and_part_type_have_defaults() -> None:
    assert RequestSpec.model_validate({"input": [{"content": [{"text": "hi"}]}]}) == RequestSpec.from_text(
        "hi"
    )


def test_request_without_any_text_is_refused() -> None:
    assert request_errors(request_body(" ", "\n")) == {
        "request.input": ["At least one non-empty text is required."]
    }


def test_request_without_input_is_refused() -> None:
    assert list(request_errors({"input": []})) == ["request.input"]
    assert request_errors({}) == {"request.input": ["This field is required."]}


def test_request_with_another_role_is_refused_at_its_position() -> None:
    body = request_body("hi")
    body["input"][0]["role"] = "system"

    assert request_errors(body) == {"request.input.0.role": ["Input should be 'user'."]}


def test_request_text_over_the_message_limit_is_refused() -> None:
    errors = request_errors(request_body("x" * (MAX_TEXT_CHARS + 1)))

    assert errors == {"request.input": [f"The text is longer than {MAX_TEXT_CHARS} characters."]}


def test_request_content_part_of_another_type_is_refused() -> None:
    errors = request_errors({"input": [{"content": [{"type": "image", "text": "x"}]}]})

    assert list(errors) == ["request.input.0.content.0.type"]


# --- dispatch --------------------------------------------------------------------------------------


def test_dispatch_defaults_to_console_channel_in_stream_mode() -> None:
    spec = parse_spec(DispatchSpec, {"target": {"session_id": "morning-news"}})

    assert (spec.type, spec.channel, spec.mode) == ("channel", "console", "stream")
    assert (spec.target.session_id, spec.target.user_id) == ("morning-news", None)


def test_dispatch_accepts_final_mode_and_a_user_id() -> None:
    spec = parse_spec(DispatchSpec, {"type": "channel", "channel": "console", "mode": "final",
                                     "target": {"user_id": "7", "session_id": "a:b.c_d-e"}})  # fmt: skip

    assert (spec.mode, spec.target.user_id) == ("final", "7")


def test_dispatch_errors_name_each_field() -> None:
    errors = dispatch_errors(
        {"channel": "email", "mode": "loud", "target": {"user_id": 7, "session_id": "a b"}}
    )

    assert errors == {
        "dispatch.channel": ["Input should be 'console'."],
        "dispatch.mode": ["Input should be 'stream' or 'final'."],
        "dispatch.target.user_id": ["Must be a string."],
        "dispatch.target.session_id": ["Must be 1-128 characters of A-Z a-z 0-9 : . _ -."],
    }


@pytest.mark.parametrize("session_id", ["", "x" * 129])
def test_dispatch_session_id_length_is_checked(session_id: str) -> None:
    assert "dispatch.target.session_id" in dispatch_errors({"target": {"session_id": session_id}})


def test_dispatch_without_target_is_refused() -> None:
    assert dispatch_errors({}) == {"dispatch.target": ["This field is required."]}


# --- error shape -----------------------------------------------------------------------------------


def test_error_fields_without_prefix_uses_bare_paths() -> None:
    with pytest.raises(ValidationError) as caught:
        ScheduleSpec.model_validate({"type": "cron", "cron": "61 * * * *"})

    assert pydantic_fields(caught.value) == {
        "cron": ["Minute field '61': 61 is out of range (allowed: 0-59)."]
    }


def test_spec_error_message_names_the_first_field() -> None:
    with pytest.raises(SpecError, match=r"^schedule\.timezone: Unknown timezone 'Nowhere'"):
        parse_spec(
            ScheduleSpec, {"type": "interval", "every_seconds": 60, "timezone": "Nowhere"}, prefix="schedule"
        )
