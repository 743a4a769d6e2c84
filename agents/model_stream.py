"""What a model's streamed answer is made of, and how the turn loop's model client reads it.

The chunks the turn loop gets (:class:`ModelChunk`, with the assembled tool calls at the end),
the one error it knows (:class:`ModelError`), and the reading of a chat-completions SSE body: split into
lines in C (:class:`SseLines`), each item parsed with orjson, tool-call fragments assembled
(:class:`StreamAssembler`), and the end of a finished body read so that its connection can be reused
(:func:`drain_body`). Plain Python, no SDK: agents/llm.py sends the request and feeds the bytes here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson

DETAIL_LIMIT = 300


class ModelError(Exception):
    """A model call failed; ``message`` is a sentence for the user naming provider and model."""

    def __init__(self, code: str, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


@dataclass(slots=True)
class ToolCall:
    """One tool call as the model asked for it; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        """The form an assistant message's ``tool_calls`` entry takes in the chat history."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(slots=True)
class ModelChunk:
    """A piece of a streamed answer.

    Text and reasoning chunks carry ``content`` / ``reasoning``. The stream always ends with
    exactly one chunk with ``done=True`` holding the assembled ``tool_calls``, the
    ``finish_reason`` and the ``usage`` (None when the server reported none).
    """

    content: str = ""
    reasoning: str = ""
    done: bool = False
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


def short_detail(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= DETAIL_LIMIT else text[: DETAIL_LIMIT - 1] + "…"


def _loads(data: bytes) -> Any:
    """A stream item's JSON: orjson (~4× faster than json for a chunk), the standard library for what orjson
    refuses but json takes (NaN, integers beyond 64 bits)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


class SseLines:
    """Splits a byte stream into SSE lines (without their end: LF, CRLF or CR, as the SSE format allows),
    in C: one `split` per network read instead of Python per line."""

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[bytes]:
        if self._tail:
            data = self._tail + data
        if b"\r" in data:
            if data.endswith(b"\r"):  # its LF may come with the next read
                self._tail = data
                return []
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        self._tail = lines.pop()
        return lines

    def close(self) -> list[bytes]:
        """The last line, when the body ended without a line end."""
        tail, self._tail = self._tail, b""
        if not tail:
            return []
        return tail.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


DRAIN_SECONDS = 1.0  # how long the end of a finished stream may take before its connection is dropped
DRAIN_BYTES = 64 * 1024


async def drain_body(body: AsyncIterator[bytes]) -> None:
    """Read what is left of a body whose stream is done, within bounds (a server that goes on sending
    after `[DONE]` loses its connection instead of holding the turn)."""
    read = 0
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for data in body:
                read += len(data)
                if read > DRAIN_BYTES:
                    return
    except TimeoutError:
        return


class StreamAssembler:
    """Reads SSE lines of a chat-completions stream into ModelChunks, assembling tool calls.

    Tool-call fragments arrive keyed by ``index``; some servers omit the index or reuse
    index 0 with a new id for the next call, so a new id also starts a new call.
    """

    def __init__(self, provider: str, model: str) -> None:
        self.provider = provider
        self.model = model
        self.finished = False
        self._data: list[bytes] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument fragments]]
        self._order: list[int] = []
        self._finish_reason: str | None = None
        self._usage: dict[str, int] | None = None

    def feed_line(self, line: bytes) -> list[ModelChunk]:
        if line.startswith(b"data:"):
            self._data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            return []
        if not line and self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            self._data = []
            return self._event(data)
        # Comments (": keep-alive"), "event:"/"id:"/"retry:" fields and stray blank lines.
        return []

    def flush(self) -> list[ModelChunk]:
        """An event whose closing blank line never came (the body just ended) still counts."""
        if not self._data or self.finished:
            return []
        data = b"\n".join(self._data)
        self._data = []
        return self._event(data)

    def _event(self, data: bytes) -> list[ModelChunk]:
        if data.strip() == b"[DONE]":
            self.finished = True
            return []
        try:
            payload = _loads(data)
        except ValueError:
            shown = short_detail(data.decode("utf-8", "replace"))[:80]
            raise ModelError(
                "invalid_response",
                f"Provider '{self.provider}' sent something that is not JSON in the stream for "
                f"model '{self.model}': {shown!r}.",
            ) from None
        if not isinstance(payload, dict):
            raise ModelError(
                "invalid_response",
                f"Provider '{self.provider}' sent an unexpected stream item for model '{self.model}'.",
            )
        if payload.get("error"):
            error = payload["error"]
            detail = error.get("message") if isinstance(error, dict) else error
            raise ModelError(
                "provider_error",
                f"Provider '{self.provider}' reported an error midway for model '{self.model}': "
                f"{short_detail(str(detail))}",
            )
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self._usage = {k: v for k, v in usage.items() if isinstance(v, int)}
        out: list[ModelChunk] = []
        for choice in payload.get("choices") or ():
            self._choice(choice, out)
        return out

    def _choice(self, choice: dict[str, Any], out: list[ModelChunk]) -> None:
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            out.append(ModelChunk(reasoning=reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            out.append(ModelChunk(content=content))
        for fragment in delta.get("tool_calls") or ():
            self._tool_fragment(fragment)
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        call_id = fragment.get("id")
        index = fragment.get("index")
        if not isinstance(index, int):
            index = self._order[-1] if self._order and not call_id else len(self._order)
        current = self._calls.get(index)
        if current is not None and call_id and current[0] and call_id != current[0]:
            index = max(self._calls) + 1
            current = None
        if current is None:
            current = self._calls[index] = ["", "", []]
            self._order.append(index)
        function = fragment.get("function") or {}
        if call_id:
            current[0] = call_id
        if function.get("name"):
            current[1] += function["name"]
        if isinstance(function.get("arguments"), str):
            current[2].append(function["arguments"])
        elif isinstance(function.get("arguments"), dict):
            current[2].append(json.dumps(function["arguments"]))

    def finish(self) -> ModelChunk:
        """The closing chunk; a stream that ended before it said it was done is broken."""
        if not self.finished and self._finish_reason is None:
            raise ModelError(
                "stream_broken",
                f"The stream from provider '{self.provider}' ended before model '{self.model}' "
                "finished its answer.",
            )
        calls = [
            ToolCall(id=c[0] or f"call_{n}", name=c[1], arguments="".join(c[2]))
            for n, c in enumerate(self._calls[i] for i in self._order)
        ]
        finish_reason = self._finish_reason or ("tool_calls" if calls else "stop")
        return ModelChunk(done=True, tool_calls=calls, finish_reason=finish_reason, usage=self._usage)
