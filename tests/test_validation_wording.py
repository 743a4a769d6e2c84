"""Validation problems read the same on every edge (agentsite/validation.py; docs/protocol.md, extensions:
Errors): REST bodies validated by pydantic or DRF, query parameters, socket frames, `?create=1` on a socket
and cron jobs name each problem under its field in one wording, and the message is the first of them."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests import factories
from tests.support.ws import closed_with, connect, rest, send

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
async def session(alice: Any) -> Any:
    return await sync_to_async(factories.session)(alice)


async def socket_error(session_id: str, key: str, frame: dict[str, Any]) -> dict[str, Any]:
    ws, first = await connect(session_id, key=key)
    assert first["type"] == "connected"
    await send(ws, frame)
    answer = await ws.receive_json_from()
    await ws.disconnect()
    assert answer["type"] == "error", answer
    return dict(answer["data"])


def rest_error(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid"
    return dict(error)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"content": ["This field is required."]}),
        ({"content": "hi", "config": {"generation": {}, "seed": 1}}, {"config.seed": ["Unknown field."]}),
        ({"content": 5}, {"content": ["Must be a string."]}),
        ({"content": "hi", "steer": "yes"}, {"steer": ["Must be a valid boolean."]}),
        ({"content": "hi", "config": []}, {"config": ["Must be a JSON object."]}),
    ],
)
async def test_a_message_reads_the_same_problems_over_rest_and_the_socket(
    session: Any, alice_key: str, body: dict[str, Any], fields: dict[str, list[str]]
) -> None:
    over_rest = rest_error(
        await rest("POST", f"/api/v1/chat/sessions/{session.id}/messages", key=alice_key, json_body=body)
    )
    name, problems = next(iter(fields.items()))
    assert over_rest["fields"] == fields
    assert over_rest["message"] == f"{name}: {problems[0]}"

    over_socket = await socket_error(session.id, alice_key, {"type": "message", **body})
    assert over_socket["code"] == "invalid_frame"
    assert over_socket["fields"] == fields
    assert over_socket["message"] == f"Invalid 'message' frame: {name}: {problems[0]}"


async def test_other_frames_carry_their_fields_too(session: Any, alice_key: str) -> None:
    error = await socket_error(session.id, alice_key, {"type": "confirmation_reply", "approved": True})
    assert error["fields"] == {"confirmation_id": ["This field is required."]}
    assert error["message"] == "Invalid 'confirmation_reply' frame: confirmation_id: This field is required."


async def test_drf_and_pydantic_bodies_word_the_same_problem_alike(staff_key: str) -> None:
    """An MCP server (DRF) and a cron job (pydantic) with an unknown and a missing field."""
    from agents.models import Agent

    await sync_to_async(Agent.objects.get_or_create)(name="default")
    mcp = rest_error(
        await rest("PUT", "/api/v1/agents/default/config/mcp/x", key=staff_key, json_body={"colour": "red"})
    )
    assert mcp["fields"] == {"colour": ["Unknown field."]}
    job = {
        "name": "j",
        "schedule": {"type": "interval", "jitter": 3},
        "task_type": "text",
        "text": "hello",
        "dispatch": {"target": {"session_id": "s"}},
    }
    cron = rest_error(await rest("POST", "/api/v1/cron/jobs", key=staff_key, json_body=job))
    assert cron["fields"] == {
        "schedule.every_seconds": ["This field is required when type is 'interval'."],
        "schedule.jitter": ["Unknown field."],
    }
    assert cron["message"] == "schedule.every_seconds: This field is required when type is 'interval'."
    missing = rest_error(
        await rest("POST", "/api/v1/cron/jobs", key=staff_key, json_body={**job, "dispatch": {}})
    )
    assert missing["fields"]["dispatch.target"] == ["This field is required."]


@pytest.mark.parametrize(
    ("path", "name", "problem"),
    [
        ("/api/v1/chat/sessions?archived=maybe", "archived", "Must be true or false."),
        ("/api/v1/chat/sessions?limit=abc", "limit", "Must be an integer between 1 and 500."),
        ("/api/v1/chat/sessions?limit=0", "limit", "Must be an integer between 1 and 500."),
        ("/api/v1/usage?days=%2B3", "days", "Must be a whole number from 1 to 366."),
    ],
)
async def test_query_parameters_name_their_problem_in_fields(
    alice_key: str, path: str, name: str, problem: str
) -> None:
    error = rest_error(await rest("GET", path, key=alice_key))
    assert error["fields"] == {name: [problem]}
    assert error["message"] == f"{name}: {problem}"


async def test_a_socket_refused_at_create_carries_the_fields_post_would_answer(
    alice: Any, alice_key: str
) -> None:
    ws, first = await connect("chat-1", key=alice_key, query={"create": "maybe"})
    assert first["data"] == {
        "code": "invalid",
        "message": "create: Must be true or false.",
        "fields": {"create": ["Must be true or false."]},
    }
    assert await closed_with(ws) == 4400

    ws, first = await connect("chat-1", key=alice_key, query={"create": "1", "title": "x" * 201})
    assert first["data"]["code"] == "invalid"
    problem = "Ensure this field has no more than 200 characters."
    assert first["data"]["fields"] == {"title": [problem]}
    assert first["data"]["message"] == f"Cannot create the session: title: {problem}"
    assert await closed_with(ws) == 4400


@pytest.mark.parametrize(
    ("problem", "worded"),
    [
        ("must be a string", "Must be a string."),
        ("Value error, expected 5 fields", "Expected 5 fields."),
        ("Unknown field.", "Unknown field."),
        ("my_token: '***' keeps a stored value", "my_token: '***' keeps a stored value."),
        ("day-of-month '30' never occurs", "day-of-month '30' never occurs."),
        ("'x' is not a valid choice", "'x' is not a valid choice."),
        ("", "Invalid value."),
    ],
)
def test_a_problem_is_a_sentence_that_keeps_the_names_it_starts_with(problem: str, worded: str) -> None:
    from agentsite.validation import sentence

    assert sentence(problem) == worded


async def test_a_wrong_type_reads_alike_in_a_drf_body_and_a_pydantic_one(
    session: Any, alice_key: str
) -> None:
    """`title` of a session (DRF's strict field) and `content` of a message (pydantic) sent as numbers."""
    drf = rest_error(
        await rest("PATCH", f"/api/v1/chat/sessions/{session.id}", key=alice_key, json_body={"title": 5})
    )
    pydantic = rest_error(
        await rest(
            "POST", f"/api/v1/chat/sessions/{session.id}/messages", key=alice_key, json_body={"content": 5}
        )
    )
    assert drf["fields"]["title"] == pydantic["fields"]["content"] == ["Must be a string."]
