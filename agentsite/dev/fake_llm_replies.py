"""What the fake model answers: the script format and how one reply becomes a chat completion.

A :class:`Reply` is one scripted answer (text, reasoning, tool calls, or an HTTP error, with delays and
broken streams for the failure tests); :class:`Completion` builds the OpenAI chunks or the whole object
for it, and :func:`stream_completion` sends those chunks as server-sent events, failing on cue.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentsite.dev.fake_llm_http import chunked


class ScriptedToolCall(BaseModel):
    """A tool call the fake model makes; ``arguments`` may be an object or a raw (even broken) string."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class Reply(BaseModel):
    """One scripted answer. Fields combine: reasoning, then text, then tool calls.

    ``text=None`` echoes the last user message. ``chunks`` splits the text into that many
    deltas (default: one per word). ``status`` answers with an HTTP error instead.
    ``delay`` waits before the response headers, ``chunk_delay`` between chunks.
    ``break_after`` drops the connection after that many chunks; ``garbage_after`` sends a
    line that is not JSON after that many chunks.
    """

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    chunks: int | None = None
    reasoning: str | None = None
    reasoning_field: Literal["reasoning_content", "reasoning"] = "reasoning_content"
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    status: int | None = None
    error_message: str | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    break_after: int | None = None
    garbage_after: int | None = None
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    retry_after_ms: int | None = None


@dataclass
class Completion:
    """Builds the chunks (or the whole object) of one scripted answer."""

    id: str
    model: str
    reply: Reply
    text: str
    created: int = field(default_factory=lambda: int(time.time()))

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    def finish_reason(self) -> str:
        if self.reply.finish_reason:
            return self.reply.finish_reason
        return "tool_calls" if self.reply.tool_calls else "stop"

    def usage(self) -> dict[str, int]:
        if self.reply.usage is not None:
            return self.reply.usage
        completion = max(1, len(self.text.split()) + len(self.reply.tool_calls))
        return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}

    def tool_calls(self) -> list[dict[str, Any]]:
        calls = []
        for index, call in enumerate(self.reply.tool_calls):
            arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            calls.append(
                {
                    "id": call.id or f"call_{self.id[-6:]}_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments},
                }
            )
        return calls

    def chunks(self) -> list[dict[str, Any]]:
        """The stream's data objects, in order, without the usage chunk."""
        out = [self._chunk({"role": "assistant", "content": ""})]
        if self.reply.reasoning:
            field_name = self.reply.reasoning_field
            out += [self._chunk({field_name: piece}) for piece in _split(self.reply.reasoning, None)]
        out += [self._chunk({"content": piece}) for piece in _split(self.text, self.reply.chunks)]
        for index, call in enumerate(self.tool_calls()):
            head = {"index": index, "id": call["id"], "type": "function"}
            head["function"] = {"name": call["function"]["name"], "arguments": ""}
            out.append(self._chunk({"tool_calls": [head]}))
            # Arguments arrive in fragments, as real servers send them.
            for piece in _fragments(call["function"]["arguments"], 3):
                out.append(self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        out.append(self._chunk({}, self.finish_reason()))
        return out

    def whole(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.reply.tool_calls:
            message["tool_calls"] = self.tool_calls()
        if self.reply.reasoning:
            message[self.reply.reasoning_field] = self.reply.reasoning
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason()}],
            "usage": self.usage(),
        }


def reply_text(reply: Reply, body: dict[str, Any]) -> str:
    if reply.text is not None:
        return reply.text
    if reply.tool_calls:
        return ""
    return f"You said: {_last_user_text(body.get('messages'))}"


def _last_user_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def _split(text: str, count: int | None) -> list[str]:
    """Split text into deltas: one per word (keeping spaces), or ``count`` near-equal pieces."""
    if not text:
        return []
    if count is None:
        words = text.split(" ")
        return [w + " " for w in words[:-1]] + ([words[-1]] if words[-1] else [])
    return _fragments(text, count)


def _fragments(text: str, count: int) -> list[str]:
    if not text:
        return []
    count = max(1, min(count, len(text)))
    size, extra = divmod(len(text), count)
    pieces, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


async def stream_completion(
    writer: asyncio.StreamWriter, completion: Completion, include_usage: bool
) -> bool:
    """Send the answer as SSE over chunked transfer encoding; False when the connection was dropped."""
    reply = completion.reply
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    lines = [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in completion.chunks()]
    if include_usage:
        usage_chunk = {**completion._chunk({}), "choices": [], "usage": completion.usage()}
        lines.append(b"data: " + json.dumps(usage_chunk).encode() + b"\n\n")
    lines.append(b"data: [DONE]\n\n")
    for index, line in enumerate(lines):
        if reply.break_after is not None and index >= reply.break_after:
            await writer.drain()
            writer.transport.abort()
            return False
        if reply.garbage_after is not None and index == reply.garbage_after:
            writer.write(chunked(b"data: {this is not json\n\n"))
        writer.write(chunked(line))
        if reply.chunk_delay and index > 0:  # the role chunk goes out with the headers
            await writer.drain()
            await asyncio.sleep(reply.chunk_delay)
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True
