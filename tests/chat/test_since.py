"""`?since=` is read one way by the socket and the SSE stream (chat/inputs.py `parse_since`, docs/protocol.md
§3.1): an integer seq, strictly; the socket took anything unreadable for 0, a full replay."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from tests import factories
from tests.support.ws import closed_with, connect, rest

pytestmark = [pytest.mark.django_db(transaction=True)]

NOT_A_SEQ = ["abc", "", "1.5", "+3", " 3", "1_0", "٣", "0x10"]
PROBLEM = {"since": ["Must be an integer event seq."]}


@pytest.fixture
async def session(alice: Any) -> Any:
    return await sync_to_async(factories.session)(alice)


@pytest.mark.parametrize("since", NOT_A_SEQ)
async def test_a_socket_since_that_is_no_seq_is_refused_with_invalid_and_4400(
    session: Any, alice_key: str, since: str
) -> None:
    ws, first = await connect(session.id, key=alice_key, query={"since": since})
    assert first == {
        "type": "error",
        "data": {"code": "invalid", "message": "since: Must be an integer event seq.", "fields": PROBLEM},
    }
    assert await closed_with(ws) == 4400


@pytest.mark.parametrize("since", NOT_A_SEQ)
async def test_the_event_stream_refuses_the_same_values_with_the_same_error(
    session: Any, alice_key: str, since: str
) -> None:
    response = await rest("GET", f"/api/v1/chat/sessions/{session.id}/events?since={since}", key=alice_key)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid",
        "message": "since: Must be an integer event seq.",
        "fields": PROBLEM,
    }


@pytest.mark.parametrize("since", ["-1", "0", "7"])
async def test_a_socket_since_that_is_a_seq_connects(session: Any, alice_key: str, since: str) -> None:
    ws, first = await connect(session.id, key=alice_key, query={"since": since})
    assert first["type"] == "connected"
    await ws.disconnect()
