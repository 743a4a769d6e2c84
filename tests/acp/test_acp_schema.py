"""Our ACP message models (acp/schema.py) against the official SDK's, in both directions.

What we send must read back identically through the SDK's models (and, where the SDK's client sent
the same message, be byte-for-byte what it sent); what an SDK-based runner sends must read into ours
with every field we use intact. The SDK is a test dependency only.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from acp import schema as ours
from acp.schema import to_wire
from acp.updates import render_update
from tests.support.acp_sdk import acp_sdk as acp

sdk = acp.schema
AGENT_METHODS = acp.meta.AGENT_METHODS
CLIENT_METHODS = acp.meta.CLIENT_METHODS
serialize_params = acp.utils.serialize_params


def sdk_request_wire(model: BaseModel) -> dict[str, Any]:
    """A request's or notification's params exactly as the SDK sends them."""
    return serialize_params(model)


def sdk_response_wire(model: BaseModel) -> dict[str, Any]:
    """A result exactly as the SDK's connection answers with it."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)


def assert_contains(actual: Any, expected: Any, where: str = "") -> None:
    """Every field of `expected` is in `actual` with the same value (recursively)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing"
            assert_contains(actual[key], value, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_contains(a, e, f"{where}[{index}]")
    else:
        assert actual == expected, where


def sdk_reads(model: BaseModel, sdk_type: type[BaseModel]) -> Any:
    """Parse our wire form with the SDK's model and check that nothing we sent was lost or changed."""
    wire = to_wire(model)
    parsed = sdk_type.model_validate(wire)
    assert_contains(parsed.model_dump(mode="json", by_alias=True, exclude_none=True), wire)
    return parsed


def test_protocol_version_and_method_names_are_the_sdks() -> None:
    assert ours.PROTOCOL_VERSION == acp.PROTOCOL_VERSION
    assert (ours.INITIALIZE, ours.SESSION_NEW, ours.SESSION_PROMPT, ours.SESSION_CANCEL) == (
        AGENT_METHODS["initialize"],
        AGENT_METHODS["session_new"],
        AGENT_METHODS["session_prompt"],
        AGENT_METHODS["session_cancel"],
    )
    assert (
        ours.SESSION_UPDATE,
        ours.SESSION_REQUEST_PERMISSION,
        ours.FS_READ_TEXT_FILE,
        ours.FS_WRITE_TEXT_FILE,
    ) == (
        CLIENT_METHODS["session_update"],
        CLIENT_METHODS["session_request_permission"],
        CLIENT_METHODS["fs_read_text_file"],
        CLIENT_METHODS["fs_write_text_file"],
    )


# -- what we send ------------------------------------------------------------------------------------------


def test_our_requests_are_what_the_sdks_client_sent() -> None:
    initialize = ours.InitializeRequest(
        protocol_version=ours.PROTOCOL_VERSION,
        client_capabilities=ours.ClientCapabilities(
            fs=ours.FileSystemCapabilities(read_text_file=True, write_text_file=True)
        ),
        client_info=ours.Implementation(name="agentsite", version="0.1.0"),
    )
    parsed = sdk_reads(initialize, sdk.InitializeRequest)
    assert parsed.client_capabilities.fs.read_text_file and parsed.client_capabilities.fs.write_text_file
    assert parsed.client_info.name == "agentsite"
    sent_by_sdk = sdk_request_wire(
        sdk.InitializeRequest(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=sdk.ClientCapabilities(
                fs=sdk.FileSystemCapabilities(read_text_file=True, write_text_file=True)
            ),
            client_info=sdk.Implementation(name="agentsite", version="0.1.0"),
        )
    )
    # The SDK also sent an empty object for the unstable `auth` capability, which says nothing.
    assert sent_by_sdk["clientCapabilities"].pop("auth") == {}
    assert to_wire(initialize) == sent_by_sdk

    new_session = ours.NewSessionRequest(cwd="/work/space", mcp_servers=[])
    assert sdk_reads(new_session, sdk.NewSessionRequest).mcp_servers == []
    assert to_wire(new_session) == {"cwd": "/work/space", "mcpServers": []}
    assert to_wire(new_session) == sdk_request_wire(sdk.NewSessionRequest(cwd="/work/space", mcp_servers=[]))

    prompt = ours.PromptRequest(session_id="s1", prompt=[ours.text_block("hello")])
    parsed_prompt = sdk_reads(prompt, sdk.PromptRequest)
    assert (
        isinstance(parsed_prompt.prompt[0], sdk.TextContentBlock) and parsed_prompt.prompt[0].text == "hello"
    )
    assert to_wire(prompt) == sdk_request_wire(
        sdk.PromptRequest(session_id="s1", prompt=[acp.text_block("hello")])
    )

    cancel = ours.CancelNotification(session_id="s1")
    assert sdk_reads(cancel, sdk.CancelNotification).session_id == "s1"
    assert to_wire(cancel) == sdk_request_wire(sdk.CancelNotification(session_id="s1"))


def test_our_answers_to_runner_requests_are_what_the_sdks_client_sent() -> None:
    selected = ours.RequestPermissionResponse(outcome=ours.SelectedOutcome(option_id="allow"))
    parsed = sdk_reads(selected, sdk.RequestPermissionResponse)
    assert isinstance(parsed.outcome, sdk.AllowedOutcome) and parsed.outcome.option_id == "allow"
    assert to_wire(selected) == sdk_response_wire(
        sdk.RequestPermissionResponse(outcome=sdk.AllowedOutcome(outcome="selected", option_id="allow"))
    )

    cancelled = ours.RequestPermissionResponse(outcome=ours.CancelledOutcome())
    assert isinstance(sdk_reads(cancelled, sdk.RequestPermissionResponse).outcome, sdk.DeniedOutcome)
    assert to_wire(cancelled) == sdk_response_wire(
        sdk.RequestPermissionResponse(outcome=sdk.DeniedOutcome(outcome="cancelled"))
    )

    read = ours.ReadTextFileResponse(content="line 1\n")
    assert sdk_reads(read, sdk.ReadTextFileResponse).content == "line 1\n"
    assert to_wire(read) == sdk_response_wire(sdk.ReadTextFileResponse(content="line 1\n"))

    written = ours.WriteTextFileResponse()
    sdk_reads(written, sdk.WriteTextFileResponse)
    assert to_wire(written) == {} == sdk_response_wire(sdk.WriteTextFileResponse())


# -- what runners send ------------------------------------------------------------------------------------


def test_sdk_handshake_and_prompt_answers_read_into_our_models() -> None:
    minimal = ours.InitializeResponse.model_validate(
        sdk_response_wire(sdk.InitializeResponse(protocol_version=1))
    )
    assert minimal.protocol_version == 1 and minimal.agent_info is None

    full = sdk.InitializeResponse(
        protocol_version=1,
        agent_capabilities=sdk.AgentCapabilities(
            load_session=True,
            prompt_capabilities=sdk.PromptCapabilities(image=True, embedded_context=True),
            mcp_capabilities=sdk.McpCapabilities(http=True),
        ),
        agent_info=sdk.Implementation(name="some-agent", title="Some Agent", version="2.1"),
    )
    parsed = ours.InitializeResponse.model_validate(sdk_response_wire(full))
    assert parsed.agent_info == ours.Implementation(name="some-agent", title="Some Agent", version="2.1")
    capabilities = parsed.agent_capabilities
    assert capabilities.load_session is True
    assert capabilities.prompt_capabilities.image and capabilities.prompt_capabilities.embedded_context
    assert capabilities.model_extra == {"mcpCapabilities": {"http": True}}  # unknown to us, kept

    session = ours.NewSessionResponse.model_validate(
        sdk_response_wire(sdk.NewSessionResponse(session_id="s-9"))
    )
    assert session.session_id == "s-9"
    for reason in ("end_turn", "cancelled", "refusal"):
        answer = sdk_response_wire(sdk.PromptResponse(stop_reason=reason))  # type: ignore[arg-type]
        assert ours.PromptResponse.model_validate(answer).stop_reason == reason


def _notification(update: BaseModel) -> ours.SessionNotification:
    wire = sdk_request_wire(acp.session_notification("s1", update))  # type: ignore[arg-type]
    notification = ours.SessionNotification.model_validate(wire)
    assert notification.session_id == "s1"
    return notification


def test_sdk_session_updates_read_into_our_models() -> None:
    message = _notification(acp.update_agent_message_text("hi")).update
    assert isinstance(message, ours.AgentMessageChunk) and message.content.text == "hi"
    thought = _notification(acp.update_agent_thought_text("hmm")).update
    assert isinstance(thought, ours.AgentThoughtChunk) and thought.content.text == "hmm"

    plan = _notification(
        acp.update_plan([acp.plan_entry("a", status="completed"), acp.plan_entry("b")])
    ).update
    assert isinstance(plan, ours.AgentPlanUpdate)
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("a", "completed", "medium"),
        ("b", "pending", "medium"),
    ]

    start = acp.start_tool_call(
        "c1",
        "Edit notes",
        kind="edit",
        status="pending",
        content=[
            acp.tool_content(acp.text_block("why")),
            acp.tool_diff_content("/w/notes.txt", "new", "old"),
            acp.tool_terminal_ref("t-1"),
        ],
        locations=[sdk.ToolCallLocation(path="/w/notes.txt", line=3)],
        raw_input={"path": "/w/notes.txt", "nested": [1, {"x": None}]},
    )
    call = _notification(start).update
    assert isinstance(call, ours.ToolCallStart)
    assert (call.tool_call_id, call.title, call.kind, call.status) == ("c1", "Edit notes", "edit", "pending")
    assert call.raw_input == {"path": "/w/notes.txt", "nested": [1, {"x": None}]}
    assert call.locations == [ours.ToolCallLocation(path="/w/notes.txt", line=3)]
    assert call.content is not None
    text, diff, terminal = call.content
    assert isinstance(text, ours.ContentToolCallContent) and text.content.text == "why"
    assert isinstance(diff, ours.FileEditToolCallContent)
    assert (diff.path, diff.old_text, diff.new_text) == ("/w/notes.txt", "old", "new")
    assert isinstance(terminal, ours.TerminalToolCallContent) and terminal.terminal_id == "t-1"

    progress = _notification(acp.update_tool_call("c1", status="completed", raw_output={"ok": True})).update
    assert isinstance(progress, ours.ToolCallProgress)
    assert (progress.status, progress.raw_output, progress.title) == ("completed", {"ok": True}, None)

    # Kinds users do not see are read as OtherUpdate, not refused.
    for other in (
        sdk.CurrentModeUpdate(session_update="current_mode_update", current_mode_id="code"),
        acp.update_user_message_text("me"),
    ):
        assert isinstance(_notification(other).update, ours.OtherUpdate)
        assert render_update(_notification(other).update) is None


def test_sdk_runner_requests_read_into_our_models_and_policy() -> None:
    tool_call = sdk.ToolCallUpdate(
        tool_call_id="perm-1",
        title="Run a command",
        kind="execute",
        status="pending",
        raw_input={"command": "ls -la"},
        locations=[sdk.ToolCallLocation(path="/w/a.txt")],
    )
    options = [
        sdk.PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
        sdk.PermissionOption(option_id="never", name="Reject always", kind="reject_always"),
    ]
    wire = sdk_request_wire(
        sdk.RequestPermissionRequest(session_id="s1", tool_call=tool_call, options=options)
    )
    request = ours.RequestPermissionRequest.model_validate(wire)
    assert request.tool_call.tool_call_id == "perm-1" and request.tool_call.raw_input == {"command": "ls -la"}
    assert [(o.option_id, o.name, o.kind) for o in request.options] == [
        ("allow", "Allow once", "allow_once"),
        ("never", "Reject always", "reject_always"),
    ]

    read = sdk_request_wire(sdk.ReadTextFileRequest(session_id="s1", path="/w/a.txt", line=2, limit=5))
    assert ours.ReadTextFileRequest.model_validate(read) == ours.ReadTextFileRequest(
        session_id="s1", path="/w/a.txt", line=2, limit=5
    )
    write = sdk_request_wire(sdk.WriteTextFileRequest(session_id="s1", path="/w/b.txt", content="x\n"))
    assert ours.WriteTextFileRequest.model_validate(write).content == "x\n"


# -- forward compatibility ---------------------------------------------------------------------------------


def test_newer_runners_fields_and_values_are_tolerated() -> None:
    answer = ours.InitializeResponse.model_validate(
        {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": "sometimes", "futureFlag": {"x": 1}},
            "agentInfo": {"name": 42},
            "authMethods": [{"id": "login", "name": "Log in"}],
            "_meta": {"vendor": True},
        }
    )
    assert answer.agent_info is None  # malformed optional field: default, not a failed handshake
    assert answer.agent_capabilities.load_session is False
    assert answer.agent_capabilities.model_extra == {"futureFlag": {"x": 1}}

    update = ours.SessionNotification.model_validate(
        {
            "sessionId": "s1",
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "c2",
                "title": "Think",
                "kind": "ponder",
                "status": "thinking",
                "content": [
                    {"type": "hologram", "data": "?"},
                    {"type": "content", "content": {"type": "text", "text": "ok"}},
                ],
                "locations": [{"line": 1}, {"path": "/w/x"}],
                "newField": 1,
            },
        }
    ).update
    assert isinstance(update, ours.ToolCallStart)
    assert (update.kind, update.status) == ("ponder", "thinking")  # unknown enum values are kept as text
    assert update.content is not None and len(update.content) == 1  # an unknown content type is dropped
    assert update.locations == [ours.ToolCallLocation(path="/w/x")]
    assert render_update(update, "call_detail") == {
        "kind": "tool_call",
        "title": "Think",
        "status": "thinking",
        "text": "ok",
    }

    brand_new = ours.SessionNotification.model_validate(
        {"sessionId": "s1", "update": {"sessionUpdate": "weather_report", "sky": "blue"}}
    ).update
    assert isinstance(brand_new, ours.OtherUpdate) and brand_new.session_update == "weather_report"
    assert ours.PromptResponse.model_validate(
        {"stopReason": "out_of_coffee", "usage": {"tokens": 3}}
    ).stop_reason == ("out_of_coffee")
    image = ours.AgentMessageChunk.model_validate(
        {"content": {"type": "image", "data": "…", "mimeType": "image/png"}}
    )
    assert render_update(image) == {"kind": "message", "text": "[image]"}


def test_we_send_only_the_fields_we_define() -> None:
    read = ours.ReadTextFileResponse.model_validate({"content": "x", "extra": "from somewhere"})
    assert to_wire(read) == {"content": "x"}
    with pytest.raises(ValueError):
        ours.SessionNotification.model_validate({"sessionId": "s1", "update": {"sessionUpdate": "tool_call"}})
