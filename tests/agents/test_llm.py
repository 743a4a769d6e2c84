"""OpenAIModelClient against the fake OpenAI-compatible server, over real HTTP with the real SDK."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from agents.llm import ModelChunk, ModelError, OpenAIModelClient
from agentsite.dev.fake_llm import FakeLLMServer, Reply, ScriptedToolCall, remote_requests, script_remote

pytest_plugins = ["tests.support.fake_llm_fixtures"]

USER = [{"role": "user", "content": "hi"}]


async def collect(client: OpenAIModelClient, **kwargs: Any) -> list[ModelChunk]:
    kwargs.setdefault("model", "fake-model")
    kwargs.setdefault("messages", USER)
    return [chunk async for chunk in client.stream_chat(**kwargs)]


async def failure(client: OpenAIModelClient, **kwargs: Any) -> tuple[ModelError, list[ModelChunk]]:
    """Stream until the client raises; returns the error and the chunks that came before it."""
    chunks: list[ModelChunk] = []
    with pytest.raises(ModelError) as caught:
        kwargs.setdefault("model", "fake-model")
        async for chunk in client.stream_chat(messages=USER, **kwargs):
            chunks.append(chunk)
    return caught.value, chunks


def text_of(chunks: list[ModelChunk]) -> str:
    return "".join(chunk.content for chunk in chunks)


async def test_streams_text_as_several_deltas_then_one_done_chunk(fake_llm, model_client) -> None:
    fake_llm.script(Reply(text="Hello there, general.", usage={"prompt_tokens": 7, "completion_tokens": 3}))

    chunks = await collect(model_client)

    assert text_of(chunks) == "Hello there, general."
    assert len([c for c in chunks if c.content]) == 3
    assert [c.done for c in chunks] == [False, False, False, True]
    done = chunks[-1]
    assert done.finish_reason == "stop"
    assert done.tool_calls == []
    assert done.usage == {"prompt_tokens": 7, "completion_tokens": 3}


async def test_default_reply_echoes_the_last_user_message(fake_llm, model_client) -> None:
    chunks = await collect(model_client, messages=[{"role": "user", "content": "ping pong"}])

    assert text_of(chunks) == "You said: ping pong"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_reasoning_chunks(fake_llm, model_client, field) -> None:
    fake_llm.script(Reply(reasoning="Let me think.", reasoning_field=field, text="Done."))

    chunks = await collect(model_client)

    assert "".join(c.reasoning for c in chunks) == "Let me think."
    assert text_of(chunks) == "Done."
    first_text = next(i for i, c in enumerate(chunks) if c.content)
    assert all(c.reasoning for c in chunks[1:first_text]), "reasoning streams before the answer"


async def test_tool_call_fragments_are_assembled_by_index(fake_llm, model_client) -> None:
    fake_llm.script(
        Reply(
            tool_calls=[
                ScriptedToolCall(name="read_file", arguments={"path": "notes/todo.txt"}, id="call_a"),
                ScriptedToolCall(name="shell", arguments={"command": "ls -la"}, id="call_b"),
            ]
        )
    )

    chunks = await collect(model_client)

    done = chunks[-1]
    assert done.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in done.tool_calls] == [
        ("call_a", "read_file", '{"path": "notes/todo.txt"}'),
        ("call_b", "shell", '{"command": "ls -la"}'),
    ]
    assert done.tool_calls[0].to_openai() == {
        "id": "call_a",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "notes/todo.txt"}'},
    }


async def test_request_asks_for_usage_and_carries_tools_and_generation_options(
    fake_llm, model_client
) -> None:
    tools = [{"type": "function", "function": {"name": "t", "description": "d", "parameters": {}}}]

    await collect(
        model_client,
        tools=tools,
        generation={"temperature": 0.2, "max_tokens": 50, "stream": False, "model": "other"},
    )

    body = fake_llm.chat_requests[-1]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"] == tools
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 50
    assert body["model"] == "fake-model", "generation options cannot override what the turn decides"
    assert fake_llm.requests[-1].headers["authorization"] == f"Bearer {model_client._client.api_key}"


async def test_no_tools_key_when_no_tool_is_enabled(fake_llm, model_client) -> None:
    await collect(model_client, tools=[])

    assert "tools" not in fake_llm.chat_requests[-1]


async def test_list_models_returns_the_provider_model_ids(fake_llm, model_client) -> None:
    assert await model_client.list_models() == ["fake-model", "fake-model-large"]


async def test_wrong_api_key_is_an_auth_error_naming_provider_and_model(fake_llm, model_client) -> None:
    fake_llm.api_key = "the-right-key"

    error, _ = await failure(model_client)

    assert error.code == "auth_failed"
    assert error.status == 401
    assert "'fake'" in error.message and "'fake-model'" in error.message
    assert "API key" in error.message
    assert "Incorrect API key provided." in error.message, "the server's own words are kept"


async def test_list_models_failure_is_readable(fake_llm, model_client) -> None:
    fake_llm.api_key = "the-right-key"

    with pytest.raises(ModelError) as caught:
        await model_client.list_models()

    assert caught.value.code == "auth_failed"
    assert "model list" in caught.value.message


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [
        (403, "auth_failed", "refused access"),
        (404, "model_not_found", "Model 'fake-model' was not found"),
        (400, "bad_request", "rejected the request"),
        (422, "bad_request", "rejected the request"),
        (429, "rate_limited", "rate limiting"),
        (500, "provider_error", "server error (HTTP 500)"),
        (503, "provider_error", "server error (HTTP 503)"),
    ],
)
async def test_http_errors_become_readable_model_errors(fake_llm, model_client, status, code, words) -> None:
    fake_llm.script(Reply(status=status, error_message="details from the server"))

    error, chunks = await failure(model_client)

    assert chunks == []
    assert (error.code, error.status) == (code, status)
    assert words in error.message
    assert "'fake'" in error.message and "'fake-model'" in error.message
    assert "details from the server" in error.message


async def test_sdk_retries_a_server_error_when_configured(fake_llm) -> None:
    client = OpenAIModelClient(base_url=fake_llm.base_url, api_key="k", provider_name="fake", max_retries=1)
    fake_llm.script(Reply(status=500, retry_after_ms=1), Reply(text="second try"))
    try:
        chunks = await collect(client)
    finally:
        await client.aclose()

    assert text_of(chunks) == "second try"
    assert len(fake_llm.chat_requests) == 2


async def test_slow_provider_times_out(fake_llm) -> None:
    client = OpenAIModelClient(
        base_url=fake_llm.base_url, api_key="k", provider_name="slow", timeout=0.2, max_retries=0
    )
    fake_llm.script(Reply(text="too late", delay=2.0))
    try:
        error, _ = await failure(client)
    finally:
        await client.aclose()

    assert error.code == "timeout"
    assert "'slow'" in error.message and "'fake-model'" in error.message


async def test_provider_that_stalls_midway_times_out_after_partial_text(fake_llm) -> None:
    client = OpenAIModelClient(
        base_url=fake_llm.base_url, api_key="k", provider_name="slow", timeout=0.2, max_retries=0
    )
    fake_llm.script(Reply(text="one two three", chunk_delay=1.0))
    try:
        error, chunks = await failure(client)
    finally:
        await client.aclose()

    assert error.code == "timeout"
    assert text_of(chunks) == "one "


async def test_refused_connection_names_provider_and_address() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the request: nothing listens there
    client = OpenAIModelClient(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="k", provider_name="local", max_retries=0
    )
    try:
        error, _ = await failure(client)
    finally:
        await client.aclose()

    assert error.code == "connection_failed"
    assert "Could not connect to provider 'local'" in error.message
    assert f"127.0.0.1:{port}" in error.message
    assert "'fake-model'" in error.message


async def test_stream_broken_midway_keeps_the_text_received_before(fake_llm, model_client) -> None:
    fake_llm.script(Reply(text="alpha beta gamma delta", break_after=3))

    error, chunks = await failure(model_client)

    assert error.code == "stream_broken"
    assert text_of(chunks) == "alpha beta "
    assert "'fake'" in error.message and "'fake-model'" in error.message


async def test_garbage_in_the_stream_is_an_invalid_response(fake_llm, model_client) -> None:
    fake_llm.script(Reply(text="alpha beta gamma", garbage_after=2))

    error, chunks = await failure(model_client)

    assert error.code == "invalid_response"
    assert "not JSON" in error.message
    assert text_of(chunks) == "alpha "


async def test_fake_server_in_another_process_is_scripted_over_http(fake_llm_process) -> None:
    """The path end-to-end tests use: ``python -m agentsite.dev.fake_llm --port 0``, /_script, /_requests."""
    await asyncio.to_thread(script_remote, fake_llm_process.base_url, Reply(text="scripted remotely"))
    client = OpenAIModelClient(
        base_url=fake_llm_process.base_url, api_key="k", provider_name="p", max_retries=0
    )
    try:
        scripted = await collect(client)
        echoed = await collect(client, messages=[{"role": "user", "content": "then echo"}])
    finally:
        await client.aclose()

    assert text_of(scripted) == "scripted remotely"
    assert text_of(echoed) == "You said: then echo"
    bodies = await asyncio.to_thread(remote_requests, fake_llm_process.base_url)
    assert [body["messages"][-1]["content"] for body in bodies] == ["hi", "then echo"]


async def test_non_streaming_completion_is_served(fake_llm: FakeLLMServer, model_client) -> None:
    """Clients other than ours (and the providers test page) may ask without streaming."""
    call = ScriptedToolCall(name="shell", arguments={"command": "ls"})
    fake_llm.script(Reply(text="whole answer", tool_calls=[call]))
    completion = await model_client._client.chat.completions.create(model="fake-model", messages=USER)

    message = completion.choices[0].message
    assert message.content == "whole answer"
    assert message.tool_calls[0].function.name == "shell"
    assert completion.choices[0].finish_reason == "tool_calls"


async def test_replies_reuse_one_kept_alive_connection(fake_llm: FakeLLMServer, model_client) -> None:
    """Issue 18: the body is read to its end after `[DONE]`, so the connection goes back to the pool and the
    next reply does not pay a new one."""
    fake_llm.script(Reply(text="one two"), Reply(text="three four"), Reply(text="five"))

    texts = [text_of(await collect(model_client)) for _ in range(3)]

    assert texts == ["one two", "three four", "five"]
    assert fake_llm.connections == 1


def test_sse_lines_split_on_every_line_end_even_across_reads() -> None:
    from agents.model_stream import SseLines as _SseLines

    lines = _SseLines()
    got = lines.feed(b'data: {"a":1}\r')  # the LF of this CRLF comes with the next read
    got += lines.feed(b"\n\r\ndata: x\rdata: y\n\ndata: par")
    got += lines.feed(b"tial")
    got += lines.close()

    assert got == [b'data: {"a":1}', b"", b"data: x", b"data: y", b"", b"data: partial"]


async def test_the_request_is_what_the_sdk_sends_and_credentials_it_refreshes_take_its_own_path(
    fake_llm: FakeLLMServer, model_client, monkeypatch
) -> None:
    """agentsite/internals.py trick 6: the streamed request is built once from what the SDK would send; a
    client whose credentials the SDK refreshes per request goes through the SDK's own path instead."""
    from agentsite.internals import SdkStreamRequest

    fake_llm.script(Reply(text="lean"), Reply(text="sdk"))
    lean = await collect(model_client, generation={"temperature": 0.5})
    monkeypatch.setattr(SdkStreamRequest, "usable", staticmethod(lambda client: False))
    model_client._stream_request = None
    sdk = await collect(model_client, generation={"temperature": 0.5})

    assert (text_of(lean), text_of(sdk)) == ("lean", "sdk")
    first, second = fake_llm.requests[-2:]
    assert first.body == second.body
    assert first.body["temperature"] == 0.5 and first.body["stream"] is True
    same = {"authorization", "content-type", "accept", "user-agent", "x-stainless-retry-count"}
    assert {k: first.headers.get(k) for k in same} == {k: second.headers.get(k) for k in same}
    assert first.headers["authorization"] == "Bearer sk-fake-test-key"
