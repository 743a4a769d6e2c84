"""ACP runners and MCP servers are one idea, "an external tool server configured per agent"
(agents/toolservers/, docs/architecture.md): one rule each for their rows, REST, admin, launch and
connections, so both kinds answer alike where they are alike."""

from __future__ import annotations

from typing import Any

import pytest

from acp.admin import AcpRunnerForm
from acp.api import AgentRunnerApi, AgentRunnerListApi
from acp.models import AcpRunner
from acp.sessions import AcpSessionRegistry
from acp.spec import AcpRunnerSpec
from agents.toolservers.api import ToolServerDetailApi, ToolServerListApi
from agents.toolservers.launch import SandboxedLaunch
from agents.toolservers.models import ToolServer
from agents.toolservers.registry import ConnectionRegistry
from mcpservers.admin import McpServerForm
from mcpservers.api import AgentMcpServerApi, AgentMcpServerListApi
from mcpservers.client import McpServerSpec
from mcpservers.models import McpServer
from mcpservers.sessions import McpSessionRegistry

KINDS = [
    pytest.param(AcpRunner, AcpRunnerForm, "acp", "runner", {}, id="acp"),
    pytest.param(McpServer, McpServerForm, "mcp", "server", {"transport": "stdio"}, id="mcp"),
]


def test_both_kinds_are_built_on_the_one_tool_server_base() -> None:
    assert issubclass(AcpRunner, ToolServer) and issubclass(McpServer, ToolServer)
    assert issubclass(AgentRunnerApi, ToolServerDetailApi) and issubclass(
        AgentMcpServerApi, ToolServerDetailApi
    )
    assert issubclass(AgentRunnerListApi, ToolServerListApi)
    assert issubclass(AgentMcpServerListApi, ToolServerListApi)
    assert issubclass(AcpRunnerSpec, SandboxedLaunch) and issubclass(McpServerSpec, SandboxedLaunch)
    assert issubclass(AcpSessionRegistry, ConnectionRegistry)
    assert issubclass(McpSessionRegistry, ConnectionRegistry)


def form_data(extra: dict[str, Any], **fields: Any) -> dict[str, Any]:
    data = {
        "agent": "default",
        "name": "x",
        "enabled": "",
        "command": "prog",
        "args": "[]",
        "env": "{}",
        "timeout_seconds": "30",
        "sandbox_paths": "[]",
        "tool_parse_mode": "call_title",
        "trusted_tools": "[]",
        "headers": "{}",
        **extra,
    }
    data.update(fields)
    return data


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "form", "path", "noun", "extra"), KINDS)
def test_the_admin_refuses_a_mask_with_nothing_to_keep_in_the_same_words(
    model: Any, form: Any, path: str, noun: str, extra: dict[str, Any]
) -> None:
    bound = form(data=form_data(extra, env='{"TOKEN": "***"}'))
    assert not bound.is_valid()
    assert bound.errors["env"] == [f"TOKEN: '***' keeps a stored value, but this {noun} has none for TOKEN."]


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "form", "path", "noun", "extra"), KINDS)
@pytest.mark.parametrize(
    ("field", "value"), [("args", '"--verbose"'), ("args", "[1]"), ("sandbox_paths", '{"a": 1}')]
)
def test_the_admin_refuses_lists_that_are_not_lists_of_strings_in_the_same_words(
    model: Any, form: Any, path: str, noun: str, extra: dict[str, Any], field: str, value: str
) -> None:
    bound = form(data=form_data(extra, **{field: value}))
    assert not bound.is_valid()
    assert bound.errors[field] == [f"{field} must be a JSON list of strings."]


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "form", "path", "noun", "extra"), KINDS)
def test_the_admin_keeps_a_masked_secret_and_masks_it_again(
    model: Any, form: Any, path: str, noun: str, extra: dict[str, Any]
) -> None:
    stored = model.objects.create(agent_id="default", name="x", command="prog", env={"TOKEN": "t0ken"})
    shown = form(instance=stored)
    assert shown.initial["env"] == {"TOKEN": "***"}
    bound = form(data=form_data(extra, env='{"TOKEN": "***", "MORE": "m"}'), instance=stored)
    assert bound.is_valid(), bound.errors
    bound.save()
    stored.refresh_from_db()
    assert stored.env == {"TOKEN": "t0ken", "MORE": "m"}


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "form", "path", "noun", "extra"), KINDS)
def test_rest_refuses_a_mask_with_nothing_to_keep_and_a_bad_name_alike(
    api: Any, staff_key: str, model: Any, form: Any, path: str, noun: str, extra: dict[str, Any]
) -> None:
    base = f"/api/v1/agents/default/config/{path}"
    masked = api(staff_key).put(f"{base}/x", {"command": "prog", "env": {"TOKEN": "***"}})
    assert masked.status_code == 400
    assert masked.json()["error"]["fields"] == {
        "env": [f"TOKEN: '***' keeps a stored value, but this {noun} has none for TOKEN."]
    }
    bad = api(staff_key).put(f"{base}/no%20spaces", {"command": "prog"})
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"] == {"name": [f"A {noun} name is 1-64 letters, digits, '_' or '-'."]}
    assert api(staff_key).delete(f"{base}/missing").status_code == 404
    assert not model.objects.exists()


async def test_a_registry_forgets_a_pairs_lock_once_nobody_holds_it() -> None:
    """The ACP registry kept one lock per (chat session, runner) ever asked for, for the process's life."""
    for registry in (AcpSessionRegistry(), McpSessionRegistry(idle_seconds=60)):
        for session in range(100):
            assert await registry.close(f"s{session}", "runner") is False
        assert registry._locks == {} and registry.count() == 0
        await registry.close_all()


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "form", "path", "noun", "extra"), KINDS)
@pytest.mark.parametrize("bad", ["", "A=B", "A\nB", "A\x00B"])
def test_rest_refuses_an_env_name_no_environment_can_hold_alike(
    api: Any, staff_key: str, model: Any, form: Any, path: str, noun: str, extra: dict[str, Any], bad: str
) -> None:
    """An ACP runner took a name with a newline that an MCP server refused."""
    base = f"/api/v1/agents/default/config/{path}"
    answer = api(staff_key).put(f"{base}/x", {"command": "prog", "env": {bad: "v"}, "extra": 1})
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"extra": ["Unknown field."]}
    answer = api(staff_key).put(f"{base}/x", {"command": "prog", "env": {bad: "v"}})
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {"env": [f"{bad!r} is not a valid environment variable name."]}
    assert not model.objects.exists()
