"""`POST /agents/{name}/config/acp/{runner}/test`: start a runner apart from any chat, shake hands, stop it.

The runner starts as it would for a chat (acp/tool.py `runner_spec`): in the site's sandbox, with the
agent's network setting, its HOME for the staff user who asked (without a sandbox only if they hold
`agents.run_unsandboxed`), in a scratch workspace removed afterwards. It gets ACP's `initialize` and
`session/new` (acp/client.py), and the answer says who it is and what it supports, or why it failed;
then its whole process group is ended. The start is in the audit trail (`runner.start`) as in a chat.
The MCP equivalent is mcpservers/probe.py.
"""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

import pydantic
from asgiref.sync import async_to_sync

from acp.client import AcpConnection
from acp.models import AcpRunner, RunnerConfig
from acp.schema import PROTOCOL_VERSION
from acp.spec import AcpError
from acp.tool import MIN_STARTUP_SECONDS, runner_spec
from agents.models import Agent
from agents.sandbox.site import get_sandbox, scratch_workspace
from agents.tools.base import ToolContext, ToolError
from audit.services import TurnAudit


class RunnerProbe(TypedDict, total=False):
    ok: bool
    agent_info: dict[str, Any] | None
    protocol_version: int
    capabilities: dict[str, Any]
    error: dict[str, str]


def runner_test(*, agent: Agent, runner: AcpRunner, user: Any) -> RunnerProbe:
    try:
        config = runner.config()
    except pydantic.ValidationError as exc:
        return _failed("misconfigured", f"Runner '{runner.name}' is malformed: {exc}")
    if (unreadable := config.unreadable_error()) is not None:
        return _failed("unreadable_secret", unreadable)
    sandbox = get_sandbox()
    with scratch_workspace("acp-test") as workspace:
        session_id = f"acp-test-{uuid.uuid4().hex}"
        context = ToolContext(
            workspace=workspace,
            session_id=session_id,
            sandbox=sandbox,
            user_id=user.pk,
            agent_name=agent.name,
            sandbox_network=agent.sandbox_network,
            may_run_unsandboxed=sandbox.mode == "none" and user.has_perm("agents.run_unsandboxed"),
            audit=TurnAudit(user_id=user.pk, session_id=session_id),
        )
        return async_to_sync(_handshake)(config, context)


async def _handshake(config: RunnerConfig, context: ToolContext) -> RunnerProbe:
    try:
        spec = runner_spec(config, context)
    except (ToolError, ValueError) as exc:  # its program is not there, or the config cannot work
        await context.audit_start("acp", config, "failed", str(exc))
        return _failed("spawn_failed", str(exc))
    conn = AcpConnection(spec, startup_timeout=max(config.timeout_seconds, MIN_STARTUP_SECONDS))
    try:
        await conn.start()
    except AcpError as exc:
        await context.audit_start("acp", config, "failed", exc.message)
        return _failed(exc.code, exc.message)
    try:
        await context.audit_start("acp", config, "started")
        info = conn.agent_info.model_dump(mode="json", exclude_none=True) if conn.agent_info else None
        capabilities = conn.agent_capabilities
        shown = capabilities.model_dump(mode="json", by_alias=True) if capabilities is not None else {}
        return {"ok": True, "agent_info": info, "protocol_version": PROTOCOL_VERSION, "capabilities": shown}
    finally:
        await conn.close()


def _failed(code: str, message: str) -> RunnerProbe:
    return {"ok": False, "error": {"code": code, "message": message}}
