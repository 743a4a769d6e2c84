"""What both servers of the benchmark stream: the same K-word reply, framed the same way.

The agentsite server gets this reply through `serve_demo.py` (the demo model answers with it); the raw
server (`raw_server.py`) sends it itself, so both put identical frames on the wire.
"""

from __future__ import annotations

import json
from typing import Any

_WORDS = (
    "Hello! I am the built-in demo model of agentsite, not a real language model: I can only repeat "
    "what you write. To chat with a real model, set OPENAI_BASE_URL and OPENAI_API_KEY (and optionally "
    "AGENTSITE_DEFAULT_MODEL) in the server's environment and restart it, or add a provider on the "
    "Providers page or through the API."
).split(" ")


def reply_pieces(chunks: int) -> list[str]:
    """`chunks` word deltas (the demo model's own words, repeated as needed) that join to the reply."""
    words = [_WORDS[i % len(_WORDS)] for i in range(chunks)]
    return [word + " " for word in words[:-1]] + [words[-1]]


def dumps(event: dict[str, Any]) -> str:
    """Encode a frame exactly as chat/consumers.py does."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)
