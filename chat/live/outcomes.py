"""How a turn's end is told: the `final_answer` and `result` events of each outcome (docs/protocol.md
§3.3)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from agents.contract import TurnResult
from chat.live.queue import QueueStore
from chat.markdown import render_markdown

logger = logging.getLogger("chat.live.controller")

TurnOutcome = Literal["completed", "error", "cancelled"]
INTERNAL_ERROR = {"code": "internal_error", "message": "The turn failed because of an internal error."}


def failed_outcome(
    exc: Exception, store: QueueStore | None, message_id: str, session_id: str
) -> tuple[TurnOutcome, TurnResult] | None:
    """A turn raised `exc`: an internal error (logged with its traceback, told without details), or None
    when it is the store's storage failing (the store has the session's live state dropped)."""
    if store is not None and store.storage_failed(exc):
        logger.warning(
            "Turn of message %s in session %s stopped: the storage failed (%s)", message_id, session_id, exc
        )
        return None
    logger.exception("Turn of message %s in session %s failed", message_id, session_id)
    return "error", TurnResult(status="error", error=dict(INTERNAL_ERROR))


def result_error(outcome: TurnOutcome, result: TurnResult | None) -> dict[str, str] | None:
    """The `{code, message}` of a turn that ended `error` (its `result` says it; its message keeps it)."""
    if outcome != "error" or result is None:
        return None
    return result.error or dict(INTERNAL_ERROR)


def final_answer(message_id: str, content: str) -> dict[str, Any]:
    """The `final_answer` event of a message: its text, and the text's Markdown rendered and sanitised
    server-side (`html`, chat/markdown.py). Rendered here, once per answer, when its final text is known:
    never on the path every event is published through."""
    return {
        "type": "final_answer",
        "message_id": message_id,
        "content": content,
        "is_final": True,
        "html": render_markdown(content),
    }


def result_events(message_id: str, outcome: TurnOutcome, result: TurnResult | None) -> list[dict[str, Any]]:
    if outcome == "cancelled" or result is None:
        return [{"type": "result", "message_id": message_id, "data": {"status": "cancelled"}}]
    if outcome == "completed":
        final = final_answer(message_id, result.final_content)
        data: dict[str, Any] = {
            "status": "completed",
            "final_content": result.final_content,
            "stop_reason": result.stop_reason,
            "usage": result.usage,
        }
        return [final, {"type": "result", "message_id": message_id, "data": data}]
    data = {"status": "error", "error": result_error(outcome, result)}
    if result.final_content:
        data["final_content"] = result.final_content
    if result.stop_reason is not None:
        data["stop_reason"] = result.stop_reason
    if result.usage is not None:
        data["usage"] = result.usage
    return [{"type": "result", "message_id": message_id, "data": data}]
