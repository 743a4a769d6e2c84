"""`POST /agents/{name}/config/acp/{runner}/test`: start a runner apart from any chat, shake hands, stop it.

The runner starts as it would for a chat (acp/tool.py `runner_spec`), in a scratch workspace
(agents/toolservers/probe.py), with its HOME for the staff user who asked. It gets ACP's `initialize` and
`session/new` (acp/client.py), and the answer says who it is and what it supports, or why it failed;
then its whole process group is ended. The start is in the audit trail (`runner.start`) as in a chat.
The MCP equivalent is mcpservers/probe.py.
"""

from __future__ import annotations

from typing import Any, TypedDict

from asgiref.sync import async_to_sync

from acp.client import AcpConnection
from acp.models import AcpRunner, RunnerConfig
from acp.schema import PROTOCOL_VERSION
from acp.spec import AcpError
from acp.tool import MIN_STARTUP_SECONDS, runner_spec
from agents.models import Agent
from agents.tools.base import ToolContext, ToolError
from agents.toolservers.probe import config_problem, probe_context


class RunnerProbe(TypedDict, total=False):
    ok: bool
    agent_info: dict[str, Any] | None
    protocol_version: int
    capabilities: dict[str, Any]
    error: dict[str, str]


def runner_test(*, agent: Agent, server: AcpRunner, user: Any) -> RunnerProbe:
    config, problem = config_problem(server, "Runner")
    if problem is not None:
        return _failed(*problem)
    with probe_context(agent=agent, user=user, prefix="acp", audited=True) as context:
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
