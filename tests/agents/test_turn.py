"""AgentTurn end to end: the real openai client, the fake model over HTTP, the real built-in tools.

Only the outside world is faked: the model (an HTTP server) and, where a test needs it, the
persistence behind TurnRecorder. Workspaces are made as the server makes them (sandbox_workspace),
and commands run in the site's sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from agents.contract import ChatRequest, InputError, StreamClosed, TurnResult
from agents.llm import OpenAIModelClient
from agents.sandbox.site import get_sandbox
from agents.tools import registry
from agents.tools.base import Tool, ToolContext, ToolParams
from agents.turn import AgentTurn
from agentsite.dev.fake_llm import FakeLLMServer, Reply, ScriptedToolCall
from chat.live.controller import SessionController
from tests.support.sandboxes import sandbox_workspace

pytest_plugins = ["tests.support.fake_llm_fixtures"]

SYSTEM = "You are a careful agent."
USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}


def call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> ScriptedToolCall:
    return ScriptedToolCall(name=name, arguments=arguments, id=call_id)


def tools_named(*names: str) -> list[Tool]:
    found = [registry.get(name) for name in names]
    assert all(found)
    return [tool for tool in found if tool is not None]


class Recorder:
    """Stands in for the Django side that stores Message rows."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def progress(self, content: str, reasoning: str) -> None:
        self.calls.append(("progress", content))

    async def assistant_message(
        self, content: str, tool_calls: list[dict[str, Any]], usage: Any, reasoning: str = ""
    ) -> None:
        self.calls.append(("assistant", content, [c["function"]["name"] for c in tool_calls], usage))

    async def partial(self, content: str, reasoning: str, status: str) -> None:
        self.calls.append(("partial", content, reasoning, status))

    async def tool_result(self, call_id: str, name: str, output: str, is_error: bool) -> None:
        self.calls.append(("tool", call_id, name, is_error))


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """This module's workspace: a folder the sandbox's user can reach (pytest's own tmp_path is 0700)."""
    with sandbox_workspace() as folder:
        yield folder


@pytest.fixture
def make_turn(model_client: OpenAIModelClient, tmp_path: Path) -> Callable[..., AgentTurn]:
    def build(
        content: str = "please help",
        *,
        tools: list[Tool] | None = None,
        approval_mode: str = "ask",
        history: list[dict[str, Any]] | None = None,
        max_steps: int = 20,
        confirmation_timeout: float = 5.0,
        recorder: Recorder | None = None,
        client: OpenAIModelClient | None = None,
        config: dict[str, Any] | None = None,
    ) -> AgentTurn:
        return AgentTurn(
            client=client or model_client,
            model="fake-model",
            provider_name="fake",
            system_prompt=SYSTEM,
            history=history or [],
            request=ChatRequest(message_id="m1", content=content, approval_mode=approval_mode, config=config),  # type: ignore[arg-type]
            tools=registry.all() if tools is None else tools,
            tool_context=ToolContext(workspace=tmp_path, session_id="s1", sandbox=get_sandbox()),
            max_steps=max_steps,
            confirmation_timeout=confirmation_timeout,
            recorder=recorder,
        )

    return build


async def run(
    turn: AgentTurn, on_event: Callable[[dict[str, Any]], None] | None = None
) -> tuple[list[dict[str, Any]], TurnResult]:
    """Drive the turn as the controller does: iterate events, then result(), then aclose()."""
    events: list[dict[str, Any]] = []
    try:
        async for event in turn:
            events.append(event)
            if on_event is not None:
                on_event(event)
        result = await turn.result()
    finally:
        await turn.aclose()
    return events, result


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def answer_confirmations(turn: AgentTurn, approved: bool) -> Callable[[dict[str, Any]], None]:
    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "confirmation_request":
            turn.resolve_confirmation(event["data"]["confirmation_id"], approved, None)

    return on_event


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in body["messages"] if message["role"] == "tool"]


# -- streaming ------------------------------------------------------------------------------


async def test_streams_deltas_and_completes_with_the_final_text(fake_llm, make_turn) -> None:
    fake_llm.script(Reply(text="Hello, how can I help?", usage=USAGE))

    events, result = await run(make_turn("hi"))

    assert [e["content"] for e in of_type(events, "delta")] == ["Hello, ", "how ", "can ", "I ", "help?"]
    assert result == TurnResult(
        status="completed", final_content="Hello, how can I help?", stop_reason="stop", usage=USAGE
    )
    assert fake_llm.chat_requests[0]["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "hi"},
    ]


async def test_reasoning_streams_as_thinking_events_before_the_answer(fake_llm, make_turn) -> None:
    fake_llm.script(Reply(reasoning="The user greets me.", text="Hi!"))

    events, result = await run(make_turn())

    kinds = [e["type"] for e in events]
    assert kinds == ["thinking"] * kinds.count("thinking") + ["delta"]
    assert "".join(e["content"] for e in of_type(events, "thinking")) == "The user greets me."
    assert result.final_content == "Hi!"


async def test_history_and_generation_options_reach_the_model(fake_llm, make_turn) -> None:
    history = [
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
    ]

    await run(make_turn("now", history=history, config={"generation": {"temperature": 0.1}}))

    body = fake_llm.chat_requests[0]
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        *history,
        {"role": "user", "content": "now"},
    ]
    assert body["temperature"] == 0.1


async def test_history_with_unanswered_tool_calls_is_repaired_before_sending(fake_llm, make_turn) -> None:
    """A turn cancelled mid-tool leaves calls without results; strict providers reject that."""
    dangling = {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [dangling]},
        {"role": "tool", "tool_call_id": "gone", "content": "orphan result"},
        {"role": "user", "content": "never mind"},
    ]

    await run(make_turn("next", history=history))

    messages = fake_llm.chat_requests[0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user", "user"]
    assert messages[3]["tool_call_id"] == "c1"
    assert "ended before" in messages[3]["content"]


# -- tools ------------------------------------------------------------------------------------


async def test_several_tool_steps_feed_each_result_back_to_the_model(fake_llm, make_turn, tmp_path) -> None:
    fake_llm.script(
        Reply(
            tool_calls=[call("write_file", {"path": "notes/a.txt", "content": "alpha"}, "c1")], usage=USAGE
        ),
        Reply(tool_calls=[call("shell", {"command": "cat notes/a.txt"}, "c2")], usage=USAGE),
        Reply(text="The file says alpha.", usage=USAGE),
    )
    recorder = Recorder()

    events, result = await run(make_turn(approval_mode="full_access", recorder=recorder))

    assert (tmp_path / "notes" / "a.txt").read_text() == "alpha"
    assert [e["type"] for e in events if e["type"] != "delta"] == ["tool_call", "tool_result"] * 2
    assert of_type(events, "tool_call")[0] == {
        "type": "tool_call",
        "call_id": "c1",
        "name": "write_file",
        "arguments": {"path": "notes/a.txt", "content": "alpha"},
    }
    shell_result = of_type(events, "tool_result")[1]
    assert shell_result["is_error"] is False and "alpha" in shell_result["output"]
    requests = fake_llm.chat_requests
    assert len(requests) == 3
    assert requests[2]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c2",
        "content": shell_result["output"],
    }
    assert requests[1]["messages"][-2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert result.status == "completed" and result.final_content == "The file says alpha."
    assert result.usage == {"prompt_tokens": 30, "completion_tokens": 6, "total_tokens": 36}
    assert recorder.calls == [
        ("assistant", "", ["write_file"], USAGE),
        ("tool", "c1", "write_file", False),
        ("assistant", "", ["shell"], USAGE),
        ("tool", "c2", "shell", False),
        ("assistant", "The file says alpha.", [], USAGE),
    ]


async def test_model_is_offered_exactly_the_enabled_tools(fake_llm, make_turn) -> None:
    await run(make_turn(tools=tools_named("read_file", "shell")))

    offered = fake_llm.chat_requests[0]["tools"]
    assert [spec["function"]["name"] for spec in offered] == ["read_file", "shell"]
    assert offered[0] == registry.get("read_file").openai_spec()  # type: ignore[union-attr]


async def test_no_tools_are_offered_when_none_is_enabled(fake_llm, make_turn) -> None:
    await run(make_turn(tools=[]))

    assert "tools" not in fake_llm.chat_requests[0]


async def test_bad_tool_calls_become_error_results_the_model_sees(fake_llm, make_turn) -> None:
    fake_llm.script(
        Reply(
            tool_calls=[
                call("launch_rockets", {}, "c1"),
                call("shell", {"command": "ls"}, "c2"),
                call("write_file", {"path": "x.txt"}, "c3"),
                call("read_file", '{"path": ', "c4"),
            ]
        ),
        Reply(text="Sorry about that."),
    )

    events, result = await run(
        make_turn(tools=tools_named("read_file", "write_file"), approval_mode="full_access")
    )

    results = {e["call_id"]: e for e in of_type(events, "tool_result")}
    assert all(r["is_error"] for r in results.values())
    assert "Unknown tool 'launch_rockets'" in results["c1"]["output"]
    assert "disabled" in results["c2"]["output"]
    assert "content" in results["c3"]["output"] and "required" in results["c3"]["output"].lower()
    assert "not valid JSON" in results["c4"]["output"]
    assert of_type(events, "tool_call")[3]["arguments"] == '{"path": ', "unparseable arguments are shown raw"
    seen = {m["tool_call_id"]: m["content"] for m in tool_messages(fake_llm.chat_requests[1])}
    assert seen == {call_id: r["output"] for call_id, r in results.items()}
    assert result.status == "completed" and result.final_content == "Sorry about that."


class _ProgressParams(ToolParams):
    pass


class _ProgressTool(Tool):
    """A tool that reports progress through ctx.emit, as the ACP delegation does."""

    name: ClassVar[str] = "progress"
    description: ClassVar[str] = "Reports progress."
    Params: ClassVar[type[BaseModel]] = _ProgressParams

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        assert ctx.emit is not None
        ctx.emit({"type": "delegate_update", "call_id": "x", "runner": "r", "update": {"kind": "message"}})
        return f"done in {ctx.workspace.name} with mode {ctx.approval_mode}"


class _BrokenTool(Tool):
    name: ClassVar[str] = "broken"
    description: ClassVar[str] = "Always crashes."
    Params: ClassVar[type[BaseModel]] = _ProgressParams

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        raise RuntimeError("boom")


async def test_tool_events_pass_through_and_a_crashing_tool_is_an_error_result(
    fake_llm, make_turn, tmp_path
) -> None:
    fake_llm.script(
        Reply(tool_calls=[call("progress", {}, "c1"), call("broken", {}, "c2")]), Reply(text="ok")
    )

    events, result = await run(make_turn(tools=[_ProgressTool(), _BrokenTool()], approval_mode="read_only"))

    assert [e["type"] for e in events][:3] == ["tool_call", "delegate_update", "tool_result"]
    results = of_type(events, "tool_result")
    assert results[0]["output"] == f"done in {tmp_path.name} with mode read_only"
    assert results[1]["is_error"] is True and "boom" in results[1]["output"]
    assert result.status == "completed"


# -- steering and limits ----------------------------------------------------------------------


async def test_steer_during_a_tool_step_is_consumed_at_the_next_model_step(fake_llm, make_turn) -> None:
    fake_llm.script(Reply(tool_calls=[call("write_file", {"path": "a.txt", "content": "x"}, "c1")]))
    turn = make_turn("write a file")

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "confirmation_request":  # the tool step is waiting: steer now
            turn.steer("and then say thanks")
            turn.resolve_confirmation(event["data"]["confirmation_id"], True, None)

    _, result = await run(turn, on_event)

    second = fake_llm.chat_requests[1]["messages"]
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-1]["content"] == "and then say thanks"
    assert result.final_content == "You said: and then say thanks"
    assert turn.take_pending() == []


async def test_steer_while_the_final_answer_streams_gets_one_more_step(fake_llm, make_turn) -> None:
    fake_llm.script(Reply(text="one two three four", chunk_delay=0.02))
    turn = make_turn("first")
    steered: list[bool] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "delta" and not steered:
            turn.steer("second thought")
            steered.append(True)

    _, result = await run(turn, on_event)

    assert len(fake_llm.chat_requests) == 2
    assert fake_llm.chat_requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": "one two three four"},
        {"role": "user", "content": "second thought"},
    ]
    assert result.final_content == "You said: second thought"
    with pytest.raises(StreamClosed):
        turn.steer("too late")


async def test_steer_before_streaming_starts_is_seen_at_the_first_step(fake_llm, make_turn) -> None:
    turn = make_turn("main message")
    turn.steer("deferred steer")

    await run(turn)

    assert [m["content"] for m in fake_llm.chat_requests[0]["messages"][-2:]] == [
        "main message",
        "deferred steer",
    ]
    assert len(fake_llm.chat_requests) == 1


async def test_take_pending_returns_unseen_steers_and_closes_input(make_turn) -> None:
    turn = make_turn()
    turn.steer("a")
    turn.steer("b")

    assert turn.take_pending() == ["a", "b"]
    with pytest.raises(StreamClosed):
        turn.steer("c")
    await turn.aclose()


async def test_max_steps_stops_a_model_that_keeps_calling_tools(fake_llm, make_turn) -> None:
    fake_llm.default = Reply(text="again", tool_calls=[call("get_current_time", {})])
    turn = make_turn(max_steps=3)

    events, result = await run(turn)

    assert len(fake_llm.chat_requests) == 3
    assert result.status == "completed"
    assert result.stop_reason == "max_steps"
    assert result.final_content == "again"
    results = of_type(events, "tool_result")
    assert [r["is_error"] for r in results] == [False, False, True]
    assert "limit of 3 model steps" in results[-1]["output"]


# -- provider failures ------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def arrange_failure(name: str, server: FakeLLMServer) -> OpenAIModelClient | None:
    """Set up one provider failure; returns a client to use instead of the default one, if any."""
    broken_text = "partial answer here"
    if name == "401":
        server.api_key = "other-key"
    elif name in {"404", "429", "500"}:
        server.script(Reply(status=int(name)))
    elif name == "timeout":
        server.script(Reply(delay=1.0))
        return OpenAIModelClient(
            base_url=server.base_url, api_key="k", provider_name="fake", timeout=0.2, max_retries=0
        )
    elif name == "refused":
        url = f"http://127.0.0.1:{_closed_port()}/v1"
        return OpenAIModelClient(base_url=url, api_key="k", provider_name="fake", max_retries=0)
    elif name == "broken":
        server.script(Reply(text=broken_text, break_after=3))
    elif name == "garbage":
        server.script(Reply(text=broken_text, garbage_after=3))
    return None


FAILURES = {
    # name: (expected code, text streamed before the failure)
    "401": ("auth_failed", ""),
    "404": ("model_not_found", ""),
    "429": ("rate_limited", ""),
    "500": ("provider_error", ""),
    "timeout": ("timeout", ""),
    "refused": ("connection_failed", ""),
    "broken": ("stream_broken", "partial answer "),
    "garbage": ("invalid_response", "partial answer "),
}


@pytest.mark.parametrize("failure", list(FAILURES))
async def test_provider_failure_ends_the_turn_with_a_readable_error_and_partial_text(
    fake_llm, make_turn, failure
) -> None:
    code, partial = FAILURES[failure]
    client = arrange_failure(failure, fake_llm)
    turn = make_turn(client=client)
    try:
        events, result = await run(turn)
    finally:
        if client is not None:
            await client.aclose()

    assert result.status == "error"
    assert result.error is not None and result.error["code"] == code
    assert "'fake'" in result.error["message"] and "'fake-model'" in result.error["message"]
    assert result.final_content == partial == "".join(e["content"] for e in of_type(events, "delta"))
    with pytest.raises(StreamClosed):
        turn.steer("after the failure")


async def test_failure_after_a_tool_step_keeps_earlier_usage(fake_llm, make_turn) -> None:
    fake_llm.script(
        Reply(tool_calls=[call("get_current_time", {})], usage=USAGE),
        Reply(status=500, error_message="overloaded"),
    )

    _, result = await run(make_turn())

    assert result.status == "error" and result.usage == USAGE
    assert result.error == {
        "code": "provider_error",
        "message": "Provider 'fake' had a server error (HTTP 500) while serving model 'fake-model'. "
        "The server said: overloaded",
    }


# -- approvals --------------------------------------------------------------------------------


def _write(path: str = "out.txt", content: str = "data") -> Reply:
    return Reply(tool_calls=[call("write_file", {"path": path, "content": content}, "w1")])


async def test_ask_mode_approved_runs_the_tool_and_the_model_sees_its_output(
    fake_llm, make_turn, tmp_path
) -> None:
    fake_llm.script(_write())
    turn = make_turn()

    events, result = await run(turn, answer_confirmations(turn, approved=True))

    request = of_type(events, "confirmation_request")[0]["data"]
    assert request["kind"] == "tool" and request["tool"] == "write_file"
    assert request["arguments"] == {"path": "out.txt", "content": "data"}
    assert request["command"] == "write 4 characters to out.txt"
    assert "dangerous" in request["reason"]
    assert of_type(events, "confirmation_resolved") == [
        {
            "type": "confirmation_resolved",
            "confirmation_id": request["confirmation_id"],
            "approved": True,
            "by": "user",
        }
    ]
    kinds = [e["type"] for e in events if e["type"] != "delta"]
    assert kinds == ["tool_call", "confirmation_request", "confirmation_resolved", "tool_result"]
    assert (tmp_path / "out.txt").read_text() == "data"
    assert "Wrote 4 bytes" in tool_messages(fake_llm.chat_requests[1])[0]["content"]
    assert result.status == "completed"


async def test_a_write_file_confirmation_shows_the_content_and_a_diff_against_the_file(
    fake_llm, make_turn, tmp_path
) -> None:
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n")
    fake_llm.script(
        Reply(tool_calls=[call("write_file", {"path": "notes.txt", "content": "one\n2\nthree\n"}, "w1")]),
        _write("fresh.txt", "new text\n"),
    )
    turn = make_turn()

    events, _ = await run(turn, answer_confirmations(turn, approved=False))

    changed, created = (event["data"]["preview"] for event in of_type(events, "confirmation_request"))
    assert changed["kind"] == "diff" and changed["path"] == "notes.txt" and changed["exists"] is True
    assert changed["old"] == "one\ntwo\nthree\n" and changed["new"] == "one\n2\nthree\n"
    assert "-two\n+2\n" in changed["diff"] and changed["truncated"] is False
    assert created["exists"] is False and "old" not in created
    assert "+new text" in created["diff"]
    assert (tmp_path / "notes.txt").read_text() == "one\ntwo\nthree\n"  # refused: nothing written


async def test_ask_mode_refused_tells_the_model_and_the_turn_completes(fake_llm, make_turn, tmp_path) -> None:
    fake_llm.script(_write(), Reply(text="Understood, I did not write it."))
    turn = make_turn()

    events, result = await run(turn, answer_confirmations(turn, approved=False))

    assert not (tmp_path / "out.txt").exists()
    assert of_type(events, "confirmation_resolved")[0]["approved"] is False
    tool_result = of_type(events, "tool_result")[0]
    assert tool_result["is_error"] is True and tool_result["output"] == "Refused by the user."
    assert tool_messages(fake_llm.chat_requests[1])[0]["content"] == "Refused by the user."
    assert result.status == "completed" and result.final_content == "Understood, I did not write it."


async def test_full_access_runs_dangerous_tools_without_asking(fake_llm, make_turn, tmp_path) -> None:
    fake_llm.script(Reply(tool_calls=[call("shell", {"command": "echo hi > made.txt && cat made.txt"})]))

    events, _ = await run(make_turn(approval_mode="full_access"))

    assert not of_type(events, "confirmation_request")
    assert (tmp_path / "made.txt").read_text() == "hi\n"
    assert "hi" in of_type(events, "tool_result")[0]["output"]


async def test_read_only_refuses_dangerous_tools_without_asking_but_runs_safe_ones(
    fake_llm, make_turn, tmp_path
) -> None:
    (tmp_path / "seen.txt").write_text("visible")
    fake_llm.script(
        Reply(
            tool_calls=[
                call("write_file", {"path": "x.txt", "content": "no"}, "c1"),
                call("list_files", {}, "c2"),
            ]
        )
    )

    events, result = await run(make_turn(approval_mode="read_only"))

    assert not of_type(events, "confirmation_request")
    refused, listed = of_type(events, "tool_result")
    assert refused["is_error"] is True and "read-only mode" in refused["output"]
    assert not (tmp_path / "x.txt").exists()
    assert listed["is_error"] is False and "seen.txt" in listed["output"]
    assert result.status == "completed"


@pytest.mark.parametrize("mode", ["ask", "full_access"])
async def test_always_refused_commands_are_refused_in_every_mode_without_asking(
    fake_llm, make_turn, mode
) -> None:
    fake_llm.script(Reply(tool_calls=[call("shell", {"command": "rm -rf /"})]))

    events, result = await run(make_turn(approval_mode=mode))

    assert not of_type(events, "confirmation_request")
    output = of_type(events, "tool_result")[0]
    assert output["is_error"] is True and "every approval mode" in output["output"]
    assert result.status == "completed"


async def test_unanswered_confirmation_times_out_as_refused(fake_llm, make_turn, tmp_path) -> None:
    fake_llm.script(_write())

    events, result = await run(make_turn(confirmation_timeout=0.05))

    resolved = of_type(events, "confirmation_resolved")[0]
    assert (resolved["approved"], resolved["by"]) == (False, "timeout")
    assert "nobody answered" in of_type(events, "tool_result")[0]["output"]
    assert not (tmp_path / "out.txt").exists()
    assert result.status == "completed"


async def test_aclose_during_a_pending_confirmation_resolves_it_as_cancel(
    fake_llm, make_turn, tmp_path
) -> None:
    fake_llm.script(_write())
    turn = make_turn()
    events: list[dict[str, Any]] = []
    asked = asyncio.Event()

    async def consume() -> None:
        async for event in turn:
            events.append(event)
            if event["type"] == "confirmation_request":
                asked.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(asked.wait(), 5)
    await turn.aclose()
    await asyncio.wait_for(consumer, 5)

    confirmation_id = of_type(events, "confirmation_request")[0]["data"]["confirmation_id"]
    assert events[-1] == {
        "type": "confirmation_resolved",
        "confirmation_id": confirmation_id,
        "approved": False,
        "by": "cancel",
    }
    assert not of_type(events, "tool_result")
    assert not (tmp_path / "out.txt").exists()
    assert len(fake_llm.chat_requests) == 1
    with pytest.raises(InputError) as late:
        turn.resolve_confirmation(confirmation_id, True, None)
    assert late.value.code == "not_found", (
        "the turn waits on it no more; the controller says already_resolved"
    )
    with pytest.raises(StreamClosed):
        turn.steer("after close")
    result = await turn.result()
    assert result.status == "error" and result.error == {
        "code": "cancelled",
        "message": "The turn was cancelled.",
    }


async def test_a_turn_closed_before_it_starts_never_calls_the_model(fake_llm, make_turn) -> None:
    turn = make_turn()
    await turn.aclose()

    events = [event async for event in turn]
    result = await turn.result()

    assert events == []
    assert result.status == "error" and result.error is not None and result.error["code"] == "cancelled"
    assert fake_llm.chat_requests == []


async def test_only_the_first_answer_to_a_confirmation_counts(fake_llm, make_turn) -> None:
    """Later answers find nothing pending (not_found); "already_resolved" is the controller's answer."""
    fake_llm.script(_write())
    turn = make_turn()
    errors: list[str] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "confirmation_request":
            confirmation_id = event["data"]["confirmation_id"]
            turn.resolve_confirmation(confirmation_id, False, None)
            for approved in (True, False):
                try:
                    turn.resolve_confirmation(confirmation_id, approved, None)
                except InputError as exc:
                    errors.append(exc.code)

    events, _ = await run(turn, on_event)

    assert errors == ["not_found", "not_found"]
    assert of_type(events, "tool_result")[0]["output"] == "Refused by the user."


async def test_unknown_confirmation_is_not_found(make_turn) -> None:
    turn = make_turn()

    with pytest.raises(InputError) as caught:
        turn.resolve_confirmation("conf_nope", True, None)

    assert caught.value.code == "not_found"
    await turn.aclose()


async def test_arguments_in_events_are_json_objects(fake_llm, make_turn) -> None:
    """Confirmation and tool_call events carry the decoded arguments, ready for the UI."""
    fake_llm.script(Reply(tool_calls=[call("get_current_time", {"timezone": "Europe/Paris"})]))

    events, _ = await run(make_turn())

    arguments = of_type(events, "tool_call")[0]["arguments"]
    assert arguments == {"timezone": "Europe/Paris"}
    assert json.loads(json.dumps(events))  # every event is plain JSON


# -- through the real session controller --------------------------------------------------------


class _TurnRuntime:
    """The runtime the Django layer will provide, reduced to what the controller needs."""

    def __init__(self, build: Callable[..., AgentTurn]) -> None:
        self.build = build

    def stream(self, request: ChatRequest, *, session_id: str, token: int | None = None) -> AgentTurn:
        return self.build(request.content, approval_mode=request.approval_mode)


@contextlib.asynccontextmanager
async def _no_lease() -> AsyncIterator[None]:
    yield


async def _next_event(queue: asyncio.Queue[dict[str, Any]], kind: str) -> dict[str, Any]:
    while True:
        event = await asyncio.wait_for(queue.get(), 5)
        if event["type"] == kind:
            return event


async def test_controller_runs_a_turn_with_a_confirmation_answered_through_it(
    fake_llm, make_turn, tmp_path
) -> None:
    fake_llm.script(_write(), Reply(text="Written."))
    controller = SessionController("s1", runtime=_TurnRuntime(make_turn), lease=_no_lease)
    queue, _ = controller.subscribe()

    await controller.submit(ChatRequest(message_id="m1", content="write it"))
    request = await _next_event(queue, "confirmation_request")
    assert controller.snapshot()["confirmations"] == [request["data"]]
    await controller.resolve_confirmation(request["data"]["confirmation_id"], True)
    final = await _next_event(queue, "final_answer")
    result = await _next_event(queue, "result")
    await controller.close()

    assert final["content"] == "Written." and final["message_id"] == "m1"
    assert result["data"]["status"] == "completed"
    assert (tmp_path / "out.txt").read_text() == "data"


async def test_controller_answers_a_second_reply_sent_at_once_already_resolved(fake_llm, make_turn) -> None:
    """docs/protocol.md: an answered confirmation → 409 already_resolved, however fast the replies come."""
    fake_llm.script(_write(), Reply(text="Not written."))
    controller = SessionController("s1", runtime=_TurnRuntime(make_turn), lease=_no_lease)
    queue, _ = controller.subscribe()

    await controller.submit(ChatRequest(message_id="m1", content="write it"))
    confirmation_id = (await _next_event(queue, "confirmation_request"))["data"]["confirmation_id"]
    replies = await asyncio.gather(
        controller.resolve_confirmation(confirmation_id, False),
        controller.resolve_confirmation(confirmation_id, True),
        return_exceptions=True,
    )
    await controller.close()

    assert replies[0] == {"confirmation_id": confirmation_id, "approved": False}
    assert isinstance(replies[1], InputError) and replies[1].code == "already_resolved"


async def test_controller_cancel_during_a_confirmation_ends_the_turn_cancelled(
    fake_llm, make_turn, tmp_path
) -> None:
    fake_llm.script(_write())
    controller = SessionController("s1", runtime=_TurnRuntime(make_turn), lease=_no_lease)
    queue, _ = controller.subscribe()

    await controller.submit(ChatRequest(message_id="m1", content="write it"))
    request = await _next_event(queue, "confirmation_request")
    await controller.cancel()
    result = await _next_event(queue, "result")
    await controller.close()

    assert result["data"]["status"] == "cancelled"
    assert controller.snapshot()["confirmations"] == []
    assert not (tmp_path / "out.txt").exists()
    assert len(fake_llm.chat_requests) == 1
    with pytest.raises(InputError):
        await controller.resolve_confirmation(request["data"]["confirmation_id"], True)


async def test_controller_pauses_after_a_provider_error_and_keeps_partial_text(fake_llm, make_turn) -> None:
    fake_llm.script(Reply(text="half an answer", break_after=3))
    controller = SessionController("s1", runtime=_TurnRuntime(make_turn), lease=_no_lease)
    queue, _ = controller.subscribe()

    await controller.submit(ChatRequest(message_id="m1", content="go"))
    result = await _next_event(queue, "result")
    await controller.close()

    assert result["data"]["status"] == "error"
    assert result["data"]["error"]["code"] == "stream_broken"
    assert result["data"].get("final_content") == "half an "
    assert controller.paused is True
