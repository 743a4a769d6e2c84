"""chat.runtime.DjangoRuntime: a turn's setup read alongside the write of its message (prepare)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents.contract import ChatRequest
from agents.turn import AgentTurn
from chat import runtime as runtime_module
from chat.runtime import DjangoRuntime
from tests import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The message ids whose setup was read from the database."""
    seen: list[str] = []
    real = runtime_module.turn_setup

    def counting(session_id: str, request: ChatRequest) -> Any:
        seen.append(request.message_id)
        if request.content == "boom":
            raise RuntimeError("the database went away")
        return real(session_id, request)

    monkeypatch.setattr(runtime_module, "turn_setup", counting)
    return seen


@pytest.fixture
def session_id(db: Any) -> str:
    return factories.session(factories.user("alice")).id


async def test_a_prepared_setup_is_read_once_and_used_by_the_turn(reads, session_id) -> None:
    runtime = DjangoRuntime()
    request = ChatRequest(message_id="m1", content="hello")
    runtime.prepare(request, session_id=session_id)
    turn = await runtime.stream(request, session_id=session_id)
    assert isinstance(turn, AgentTurn) and turn.request is request
    assert reads == ["m1"]
    again = await runtime.stream(ChatRequest(message_id="m2", content="no prepare"), session_id=session_id)
    assert isinstance(again, AgentTurn) and reads == ["m1", "m2"]
    assert runtime._prepared == {}


async def test_a_failed_prepared_read_fails_the_turn_that_uses_it(reads, session_id) -> None:
    runtime = DjangoRuntime()
    request = ChatRequest(message_id="m1", content="boom")
    runtime.prepare(request, session_id=session_id)
    with pytest.raises(RuntimeError, match="went away"):
        await runtime.stream(request, session_id=session_id)


async def test_setups_of_turns_that_never_started_are_dropped(reads, session_id, monkeypatch) -> None:
    monkeypatch.setattr(runtime_module, "PREPARED_KEPT", 3)
    runtime = DjangoRuntime()
    for n in range(3):
        runtime.prepare(
            ChatRequest(message_id=f"gone{n}", content="boom" if n == 0 else "x"), session_id=session_id
        )
    await _settled(runtime)  # read (one failed), never taken by a turn
    runtime.prepare(ChatRequest(message_id="live", content="x"), session_id=session_id)
    assert list(runtime._prepared) == [(session_id, "live")]
    await runtime.stream(ChatRequest(message_id="live", content="x"), session_id=session_id)


async def _settled(runtime: DjangoRuntime) -> None:
    await asyncio.gather(*runtime._prepared.values(), return_exceptions=True)
