"""Turn ACP `session/update` payloads into the small dicts users see as `delegate_update` events.

docs/protocol.md §3.3: `{kind: message|thought|tool_call|tool_call_update|plan, text?, title?, status?}`.
How much of a runner's tool activity is shown depends on the runner's `tool_parse_mode`:

- `call_title`   — tool calls and their updates show only title and status (the default: short).
- `update_detail`— as above, plus the text of each `tool_call_update` (its output as it arrives).
- `call_detail`  — the text of the `tool_call` itself (its input) and of every update.
"""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel

from acp.schema import (
    SESSION_UPDATE_ADAPTER,
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentBlock,
    ContentToolCallContent,
    FileEditToolCallContent,
    OtherUpdate,
    SessionUpdate,
    TerminalToolCallContent,
    ToolCallProgress,
    ToolCallStart,
)

ToolParseMode = Literal["call_title", "update_detail", "call_detail"]
UpdateKind = Literal["message", "thought", "tool_call", "tool_call_update", "plan"]
# The one list of modes: the runner rows (acp/models.py), their REST validation and the settings page use it.
TOOL_PARSE_MODES: tuple[ToolParseMode, ...] = ("call_title", "update_detail", "call_detail")
_DETAIL_CHARS = 2000


class RenderedUpdate(TypedDict):
    """The wire shape of `delegate_update.update`."""

    kind: UpdateKind
    text: NotRequired[str]
    title: NotRequired[str]
    status: NotRequired[str]


_UPDATE_TYPES = (
    AgentMessageChunk,
    AgentThoughtChunk,
    AgentPlanUpdate,
    ToolCallStart,
    ToolCallProgress,
    OtherUpdate,
)


def parse_update(raw: dict[str, Any]) -> SessionUpdate:
    """Validate a raw `session/update` `update` object (camelCase wire form) into its model.

    Unknown kinds parse as `OtherUpdate`; a known kind with missing required fields raises
    pydantic's ValidationError.
    """
    return SESSION_UPDATE_ADAPTER.validate_python(raw)


def render_update(
    update: BaseModel | dict[str, Any], tool_parse_mode: str = "call_title"
) -> RenderedUpdate | None:
    """The user-facing form of one update, or None for kinds users do not see (modes, commands ...).

    `update` is one of our models, the wire dict, or any pydantic model whose by-alias dump is the
    wire form (another ACP library's, for instance): the last two are parsed first.
    """
    if tool_parse_mode not in TOOL_PARSE_MODES:
        raise ValueError(f"Unknown tool_parse_mode {tool_parse_mode!r}.")
    model = _as_update(update)
    if isinstance(model, AgentMessageChunk):
        return {"kind": "message", "text": _block_text(model.content)}
    if isinstance(model, AgentThoughtChunk):
        return {"kind": "thought", "text": _block_text(model.content)}
    if isinstance(model, AgentPlanUpdate):
        lines = [f"[{entry.status}] {entry.content}" for entry in model.entries]
        return {"kind": "plan", "text": "\n".join(lines)}
    if isinstance(model, ToolCallStart):
        return _render_tool(model, "tool_call", with_detail=tool_parse_mode == "call_detail")
    if isinstance(model, ToolCallProgress):
        return _render_tool(model, "tool_call_update", with_detail=tool_parse_mode != "call_title")
    return None


def _as_update(update: BaseModel | dict[str, Any]) -> BaseModel:
    if isinstance(update, _UPDATE_TYPES):
        return update
    if isinstance(update, BaseModel):
        update = update.model_dump(mode="json", by_alias=True, exclude_none=True)
    return parse_update(update)


def message_text(update: BaseModel) -> str | None:
    """The reply text carried by an `agent_message_chunk`, else None."""
    if isinstance(update, AgentMessageChunk):
        return _block_text(update.content)
    return None


def _render_tool(
    model: ToolCallStart | ToolCallProgress,
    kind: Literal["tool_call", "tool_call_update"],
    *,
    with_detail: bool,
) -> RenderedUpdate:
    rendered: RenderedUpdate = {"kind": kind}
    if model.title:
        rendered["title"] = model.title
    if model.status:
        rendered["status"] = model.status
    if with_detail:
        detail = _tool_detail(model, prefer_input=kind == "tool_call")
        if detail:
            rendered["text"] = detail
    return rendered


def _tool_detail(model: ToolCallStart | ToolCallProgress, *, prefer_input: bool) -> str:
    """Human text for a tool call: its content blocks, else its raw input (calls) or output (updates)."""
    parts = [_tool_content_text(item) for item in model.content or []]
    text = "\n".join(part for part in parts if part)
    if not text:
        raw = model.raw_input if prefer_input else model.raw_output
        if raw is None:
            raw = model.raw_output if prefer_input else model.raw_input
        text = _raw_text(raw)
    return text[:_DETAIL_CHARS]


def _tool_content_text(
    item: ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent,
) -> str:
    if isinstance(item, ContentToolCallContent):
        return _block_text(item.content)
    if isinstance(item, FileEditToolCallContent):
        return f"edit {item.path}"
    if isinstance(item, TerminalToolCallContent):
        return f"terminal {item.terminal_id}"
    return ""


def _raw_text(raw: Any) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    return json.dumps(raw, ensure_ascii=False, default=str)


def _block_text(block: ContentBlock) -> str:
    """Text of a content block; non-text blocks (images, resources) are named, not inlined."""
    if block.type == "text" and block.text is not None:
        return block.text
    return f"[{block.type or 'content'}]"
