"""A tool server's Test (`POST …/config/acp/{runner}/test`, `…/config/mcp/{server}/test`): the server is
started apart from any chat, as it would be for one — in the site's sandbox, with the agent's network
setting, for the staff user who asked (without a sandbox only if they hold `agents.run_unsandboxed`) — in a
scratch workspace removed afterwards. What it is asked is its protocol's (acp/probe.py: the handshake;
mcpservers/probe.py: its tools).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pydantic

from agents.models import Agent
from agents.sandbox.site import get_sandbox, scratch_workspace
from agents.tools.base import ToolContext
from audit.services import TurnAudit


def config_problem(server: Any, label: str) -> tuple[Any, tuple[str, str] | None]:
    """The server's typed config, or why it cannot start at all: `(code, message)` for a malformed row or
    a secret no configured key opens (`label`: how the message names it, "Runner", "MCP server")."""
    try:
        config = server.config()
    except pydantic.ValidationError as exc:
        return None, ("misconfigured", f"{label} '{server.name}' is malformed: {exc}")
    if (unreadable := config.unreadable_error()) is not None:
        return None, ("unreadable_secret", unreadable)
    return config, None


@contextmanager
def probe_context(*, agent: Agent, user: Any, prefix: str, audited: bool) -> Iterator[ToolContext]:
    """The context of a Test call in a scratch workspace (`audited`: its start is in the audit trail in
    the user's name, as a chat's would be)."""
    sandbox = get_sandbox()
    with scratch_workspace(f"{prefix}-test") as workspace:
        session_id = f"{prefix}-test-{uuid.uuid4().hex}"
        yield ToolContext(
            workspace=workspace,
            session_id=session_id,
            sandbox=sandbox,
            user_id=user.pk,
            agent_name=agent.name,
            sandbox_network=agent.sandbox_network,
            may_run_unsandboxed=sandbox.mode == "none" and user.has_perm("agents.run_unsandboxed"),
            audit=TurnAudit(user_id=user.pk, session_id=session_id) if audited else None,
        )
