"""The built-in demo model: offline, streams several deltas, says what it is and how to get a real one."""

from __future__ import annotations

import time
from pathlib import Path

from agents.contract import ChatRequest
from agents.demo import DEMO_MODEL, DemoModelClient
from agents.tools.base import ToolContext
from agents.turn import AgentTurn


async def stream_text(client: DemoModelClient, content: str) -> tuple[list[str], dict | None]:
    deltas: list[str] = []
    usage = None
    async for chunk in client.stream_chat(model=DEMO_MODEL, messages=[{"role": "user", "content": content}]):
        if chunk.content:
            deltas.append(chunk.content)
        if chunk.done:
            usage = chunk.usage
            assert chunk.finish_reason == "stop"
            assert chunk.tool_calls == []
    return deltas, usage


async def test_demo_reply_streams_in_several_deltas_and_echoes_the_user() -> None:
    deltas, usage = await stream_text(DemoModelClient(delay=0), "What is the weather?")

    text = "".join(deltas)
    assert len(deltas) > 10
    assert 'You said: "What is the weather?"' in text
    assert usage is not None and usage["completion_tokens"] == len(deltas)


async def test_demo_reply_says_it_is_the_demo_model_and_how_to_configure_a_real_one() -> None:
    deltas, _ = await stream_text(DemoModelClient(delay=0), "hello")

    text = "".join(deltas)
    assert "demo model" in text
    assert "not a real language model" in text
    for hint in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "AGENTSITE_DEFAULT_MODEL",
        "Providers page",
        "/api/v1/providers",
    ):
        assert hint in text


async def test_demo_delay_between_chunks_is_configurable() -> None:
    started = time.perf_counter()
    deltas, _ = await stream_text(DemoModelClient(delay=0.002), "hi")
    paced = time.perf_counter() - started

    assert paced >= 0.002 * len(deltas)


async def test_demo_lists_itself_as_its_only_model() -> None:
    assert await DemoModelClient().list_models() == [DEMO_MODEL]


async def test_a_turn_on_the_demo_model_completes_with_its_reply(tmp_path: Path) -> None:
    turn = AgentTurn(
        client=DemoModelClient(delay=0),
        model=DEMO_MODEL,
        provider_name="demo",
        system_prompt="You are helpful.",
        history=[],
        request=ChatRequest(message_id="m1", content="ping"),
        tools=[],
        tool_context=ToolContext(workspace=tmp_path, session_id="s1"),
    )

    events = [event async for event in turn]
    result = await turn.result()
    await turn.aclose()

    assert {event["type"] for event in events} == {"delta"}
    assert result.status == "completed"
    assert result.final_content == "".join(event["content"] for event in events)
    assert 'You said: "ping"' in result.final_content
