"""The built-in demo model: an offline, in-process ModelClient.

A fresh install has no provider configured, yet the portal should still answer, stream
and show how the pieces fit. The demo model does that, and says plainly what it is and
how to connect a real model, so nobody mistakes it for one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agents.llm import ModelChunk

DEMO_MODEL = "demo"

_HOW_TO = (
    "To chat with a real model, set OPENAI_BASE_URL and OPENAI_API_KEY (and optionally "
    "AGENTSITE_DEFAULT_MODEL) in the server's environment and restart it, or add a provider "
    "on the Providers page or through the API (POST /api/v1/providers, then "
    "PUT /api/v1/providers/active)."
)


class DemoModelClient:
    """Streams a scripted reply word by word; ``delay`` seconds between chunks (0 in tests)."""

    provider_name = "demo"

    def __init__(self, *, delay: float = 0.02) -> None:
        self.delay = delay

    async def list_models(self) -> list[str]:
        return [DEMO_MODEL]

    async def stream_chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        generation: dict[str, Any] | None = None,
    ) -> AsyncIterator[ModelChunk]:
        text = demo_reply(last_user_text(messages))
        pieces = _words(text)
        for piece in pieces:
            if self.delay:
                await asyncio.sleep(self.delay)
            yield ModelChunk(content=piece)
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(pieces),
            "total_tokens": prompt_tokens + len(pieces),
        }
        yield ModelChunk(done=True, finish_reason="stop", usage=usage)


def demo_reply(user_text: str) -> str:
    """The demo model's answer to ``user_text``."""
    said = " ".join(user_text.split())
    if len(said) > 200:
        said = said[:199] + "…"
    echo = f'You said: "{said}". ' if said else ""
    return (
        "Hello! I am the built-in demo model of agentsite, not a real language model: "
        f"I can only repeat what you write. {echo}{_HOW_TO}"
    )


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the newest user message (content may be a string or a list of parts)."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        return str(content or "")
    return ""


def _words(text: str) -> list[str]:
    """Split into word deltas that join back to ``text`` exactly."""
    words = text.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]]
