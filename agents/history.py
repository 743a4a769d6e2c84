"""The one repair of stored conversation history before a model sees it.

A turn that was cancelled, crashed or interrupted by a restart between an assistant's tool calls
and their results leaves calls without results, and strict providers (OpenAI among them) then
reject every later request of the session; a tool message whose call is gone is rejected too.
The store hands over its rows as they are (chat/store.py `history_for_model`); the turn repairs
them here, once, just before its first model request.
"""

from __future__ import annotations

from typing import Any

MISSING_RESULT = "No result: the turn ended before this tool call finished."


def repair_history(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Make stored history acceptable to strict providers.

    Every tool call gets a result right after its assistant message: the stored one, or a note
    (:data:`MISSING_RESULT`) that tells the model the call never finished. Tool results that
    answer no open call are dropped.
    """
    repaired: list[dict[str, Any]] = []
    open_calls: list[str] = []
    for message in history:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in open_calls:
                open_calls.remove(call_id)
                repaired.append(message)
            continue
        repaired.extend(_missing_results(open_calls))
        open_calls = []
        repaired.append(message)
        if role == "assistant":
            open_calls = [call.get("id") for call in message.get("tool_calls") or () if call.get("id")]
    repaired.extend(_missing_results(open_calls))
    return repaired


def _missing_results(call_ids: list[str]) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": call_id, "content": MISSING_RESULT} for call_id in call_ids]
