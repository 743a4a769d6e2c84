"""chat.runtime.DjangoRuntime: a turn's setup read from its one entry (stream), alongside the write of its
message."""

from __future__ import annotations

import asyncio
import gc
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


async def test_a_turns_setup_is_read_from_its_one_entry_and_used_when_it_opens(reads, session_id) -> None:
    """The runtime is entered once per turn (agents/contract.py Runtime.stream): the setup is read from then
    on, alongside the write of the message, and awaiting what it returned opens the turn with it."""
    runtime = DjangoRuntime()
    request = ChatRequest(message_id="m1", content="hello")
    opening = runtime.stream(request, session_id=session_id)
    async with asyncio.timeout(5):
        while reads != ["m1"]:  # read before anyone awaits the opening
            await asyncio.sleep(0.01)
    turn = await opening
    assert isinstance(turn, AgentTurn) and turn.request is request
    assert reads == ["m1"]
    assert not hasattr(runtime, "prepare")


async def test_a_failed_setup_read_fails_the_turn_that_opens(reads, session_id) -> None:
    runtime = DjangoRuntime()
    opening = runtime.stream(ChatRequest(message_id="m1", content="boom"), session_id=session_id)
    with pytest.raises(RuntimeError, match="went away"):
        await opening


async def test_a_turn_that_never_opens_leaves_nothing_behind(reads, session_id, caplog) -> None:
    """Cancelled before its lease, a turn closes its opening (chat/live/active.py discard_opening): the
    setup read, failed or not, is neither kept nor logged as an exception nobody retrieved."""
    runtime = DjangoRuntime()
    for n in range(3):
        opening = runtime.stream(
            ChatRequest(message_id=f"gone{n}", content="boom" if n == 0 else "x"), session_id=session_id
        )
        opening.close()
    async with asyncio.timeout(5):
        while len(reads) < 3:
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    gc.collect()
    assert "never retrieved" not in caplog.text
    assert vars(runtime).keys() == {"_clients"}  # no table of setups waiting for their turn
