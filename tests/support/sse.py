"""A small Server-Sent Events reader over an httpx streaming response, for the SSE endpoint tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class SseEvent:
    """One dispatched SSE event: its `id:` and `event:` fields and the decoded `data:` JSON."""

    id: str | None
    event: str | None
    data: dict[str, Any]


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """Parse the stream as the SSE spec does: fields until a blank line; comment lines are skipped."""
    fields: dict[str, list[str]] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields:
                yield SseEvent(
                    id=fields.get("id", [None])[-1],
                    event=fields.get("event", [None])[-1],
                    data=json.loads("\n".join(fields["data"])),
                )
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name, []).append(value.removeprefix(" "))


async def read_until(
    events: AsyncIterator[SseEvent], predicate: Callable[[dict[str, Any]], bool]
) -> list[SseEvent]:
    """Every event up to and including the first whose data matches `predicate`."""
    seen: list[SseEvent] = []
    async for event in events:
        seen.append(event)
        if predicate(event.data):
            return seen
    raise AssertionError(f"the stream ended before the awaited event; got {[e.data for e in seen]}")
