"""`delegate_external_agent`: the model hands work to an external agent over ACP (docs/protocol.md §4).

Runner configs are read from the database on every call (any process may have changed them);
live runner connections are kept in this tool's `AcpSessionRegistry`, keyed by (chat session,
runner), and released through the tool lifecycle hooks when a chat session closes or the server
stops. Runner progress reaches the user as `delegate_update` events; permission questions become
`confirmation_request`s of kind `acp_permission` (or are answered by policy, shown as
`confirmation_resolved by: "policy"`). Every failure is a ToolError: the model reads one clear
sentence as an `is_error` result and the turn goes on.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from acp.models import RunnerConfig
from acp.services import runner_configs_for_agent
from agents.approvals import decision_entry
from agents.contract import ConfirmationResolvedEvent
from agents.sandbox import SandboxRefused
from agents.tools.base import Risk, Tool, ToolContext, ToolError, ToolParams
from agents.toolservers.launch import launch_fields
from agentsite.db import database_sync_to_async
from audit.actions import APPROVAL_DECIDE

if TYPE_CHECKING:
    from acp.client import AcpConnection, AcpError
    from acp.policy import PermissionDecision, PermissionRequest
    from acp.sessions import AcpSessionRegistry
    from acp.spec import AcpRunnerSpec
    from acp.updates import RenderedUpdate

TOOL_NAME = "delegate_external_agent"
Action = Literal["list", "status", "start", "message", "cancel", "close"]
_DANGEROUS_ACTIONS = frozenset({"start", "message"})
_SHOWN_MESSAGE_CHARS = 300
# Starting a runner (npx downloads, interpreter start-up) may take longer than a short prompt timeout allows.
MIN_STARTUP_SECONDS = 60


class DelegateParams(ToolParams):
    action: Action
    runner: str | None = None
    message: str | None = None


class DelegateExternalAgentTool(Tool):
    name = TOOL_NAME
    description = (
        "Hand work to an external coding agent (an ACP runner such as Claude Code, Gemini CLI or goose) "
        "that works in this chat's workspace. Actions: 'list' the enabled runners and their state; "
        "'status' of one runner; 'start' a runner with a first 'message' (its reply is the result); "
        "'message' an open runner again; 'cancel' its running prompt; 'close' it when done."
    )
    Params = DelegateParams
    risk = "dangerous"
    default_enabled = False

    def __init__(self) -> None:
        self._sessions: AcpSessionRegistry | None = None

    @property
    def sessions(self) -> AcpSessionRegistry:
        # Load the ACP client when a runner is first used: most processes never start one.
        if self._sessions is None:
            from acp.sessions import AcpSessionRegistry

            self._sessions = AcpSessionRegistry()
        return self._sessions

    # -- Tool API ----------------------------------------------------------------------------------

    def risk_for(self, params: BaseModel) -> Risk:
        assert isinstance(params, DelegateParams)
        return "dangerous" if params.action in _DANGEROUS_ACTIONS else "safe"

    def describe(self, params: BaseModel) -> str | None:
        assert isinstance(params, DelegateParams)
        if params.action not in _DANGEROUS_ACTIONS:
            return None
        message = (params.message or "")[:_SHOWN_MESSAGE_CHARS]
        return f"{params.action} external agent '{params.runner or '?'}': {message}"

    async def run(self, params: BaseModel, ctx: ToolContext) -> str:
        assert isinstance(params, DelegateParams)
        configs = await database_sync_to_async(runner_configs_for_agent)(agent_name=ctx.agent_name)
        match params.action:
            case "list":
                return self._list(configs, ctx)
            case "status":
                return self._status(configs, ctx, params)
            case "start":
                return await self._start(configs, ctx, params)
            case "message":
                return await self._message(configs, ctx, params)
            case "cancel":
                return await self._cancel(configs, ctx, params)
            case "close":
                return await self._close(configs, ctx, params)

    async def close_session(self, session_id: str) -> None:
        """The chat session was closed: end its runners and their process groups."""
        if self._sessions is not None:
            await self._sessions.close_chat_session(session_id)

    async def shutdown(self) -> None:
        """The server is stopping: end every runner."""
        if self._sessions is not None:
            await self._sessions.close_all()

    # -- actions -------------------------------------------------------------------------------------

    def _list(self, configs: dict[str, RunnerConfig], ctx: ToolContext) -> str:
        runners = [
            {"runner": name, "state": self.sessions.state(ctx.session_id, name)}
            for name, config in sorted(configs.items())
            if config.enabled
        ]
        if not runners:
            return "No external agents (ACP runners) are enabled for this agent."
        return json.dumps({"runners": runners})

    def _status(self, configs: dict[str, RunnerConfig], ctx: ToolContext, params: DelegateParams) -> str:
        runner = _runner_name(params)
        state = self.sessions.state(ctx.session_id, runner)
        if runner not in configs and state == "closed":
            raise ToolError(_unknown(runner, configs))
        return json.dumps({"runner": runner, "state": state})

    async def _start(self, configs: dict[str, RunnerConfig], ctx: ToolContext, params: DelegateParams) -> str:
        config = _enabled_config(configs, _runner_name(params))
        message = _message(params)
        if (unreadable := config.unreadable_error()) is not None:
            raise ToolError(unreadable)
        if self.sessions.get(ctx.session_id, config.name) is not None:
            raise ToolError(
                f"Runner '{config.name}' is already open in this chat session; use message to talk to it."
            )
        try:
            spec = runner_spec(config, ctx)
            startup_timeout = max(config.timeout_seconds, MIN_STARTUP_SECONDS)
            conn = await self.sessions.start(ctx.session_id, spec, startup_timeout=startup_timeout)
        except ValueError as exc:
            await ctx.audit_start("acp", config, "failed", f"misconfigured: {exc}")
            raise ToolError(f"Runner '{config.name}' is misconfigured: {exc}") from None
        except _acp_error() as exc:
            await ctx.audit_start("acp", config, "failed", exc.message)
            raise ToolError(_start_failure(config.name, exc)) from None
        except asyncio.CancelledError:
            await asyncio.shield(ctx.audit_start("acp", config, "cancelled"))
            raise
        await ctx.audit_start("acp", config, "started")
        return await _prompt(conn, message, ctx)

    async def _message(
        self, configs: dict[str, RunnerConfig], ctx: ToolContext, params: DelegateParams
    ) -> str:
        config = _enabled_config(configs, _runner_name(params))
        message = _message(params)
        conn = self.sessions.get(ctx.session_id, config.name)
        if conn is None:
            if self.sessions.state(ctx.session_id, config.name) == "exited":
                raise ToolError(f"Runner '{config.name}' has exited; use start to run it again.")
            raise ToolError(
                f"Runner '{config.name}' has no open session in this chat session; use start first."
            )
        return await _prompt(conn, message, ctx)

    async def _cancel(
        self, configs: dict[str, RunnerConfig], ctx: ToolContext, params: DelegateParams
    ) -> str:
        runner = _runner_name(params)
        conn = self.sessions.get(ctx.session_id, runner)
        if conn is None:
            if runner not in configs:
                raise ToolError(_unknown(runner, configs))
            return f"Runner '{runner}' has no open session; there is nothing to cancel."
        await conn.cancel()
        return f"Asked runner '{runner}' to cancel its current work (session/cancel)."

    async def _close(self, configs: dict[str, RunnerConfig], ctx: ToolContext, params: DelegateParams) -> str:
        runner = _runner_name(params)
        if runner not in configs and self.sessions.state(ctx.session_id, runner) == "closed":
            raise ToolError(_unknown(runner, configs))
        if await self.sessions.close(ctx.session_id, runner):
            return f"Closed runner '{runner}'; its process has ended."
        return f"Runner '{runner}' had no open session; nothing to close."


# -- one prompt, with its events and permission questions ------------------------------------------------


async def _prompt(conn: AcpConnection, message: str, ctx: ToolContext) -> str:
    """Send `message`; stream updates to the user; the reply text, or a ToolError saying why not."""
    runner = conn.spec.name
    call_id = ctx.extras.get("call_id")

    def on_update(update: RenderedUpdate) -> None:
        if ctx.emit is not None:
            ctx.emit(
                {"type": "delegate_update", "call_id": call_id, "runner": runner, "update": dict(update)}
            )

    try:
        reply = await conn.prompt(
            message,
            approval_mode=ctx.approval_mode,
            on_update=on_update,
            on_permission=lambda request: _ask_user(ctx, runner, request),
            on_policy_decision=lambda request, decision: _show_policy(ctx, runner, request, decision),
        )
    except _acp_error() as exc:
        raise ToolError(_prompt_failure(runner, exc)) from None
    return _reply_text(runner, reply, conn.stop_reason)


async def _ask_user(ctx: ToolContext, runner: str, request: PermissionRequest) -> str | None:
    """A runner's permission question as a confirmation; the chosen option id, or None (`cancelled`)."""
    if ctx.request_permission is None:
        return None
    what = request.title or request.kind or "a tool call"
    outcome = await ctx.request_permission(
        tool=what,
        arguments=_shown_input(request.raw_input),
        reason=f"External agent '{runner}' asks permission for: {what}.",
        kind="acp_permission",
        command=request.command,
        options=[dict(option) for option in request.options],
    )
    if outcome.by != "user":  # timeout or cancel: the runner is told `cancelled`
        return None
    if request.has_option(outcome.option_id):
        return str(outcome.option_id)
    if outcome.approved:
        return request.option_of_kind("allow_once", "allow_always")
    return request.option_of_kind("reject_once", "reject_always")


def _shown_input(raw: Any) -> dict[str, Any]:
    """The runner's tool input as the confirmation's `arguments` object."""
    if isinstance(raw, dict):
        return raw
    return {} if raw is None else {"input": raw}


async def _show_policy(
    ctx: ToolContext, runner: str, request: PermissionRequest, decision: PermissionDecision
) -> None:
    """Policy answered without asking: every subscriber still sees that a permission was decided, and the
    decision is in the audit trail like a user's (agents/approvals.py `decision_entry`)."""
    confirmation_id = f"conf_{uuid.uuid4().hex}"
    if ctx.emit is not None:
        event: ConfirmationResolvedEvent = {
            "type": "confirmation_resolved",
            "confirmation_id": confirmation_id,
            "approved": decision.approved,
            "by": "policy",
        }
        if decision.option_id is not None:
            event["option_id"] = decision.option_id
        ctx.emit(event)
    if ctx.audit is not None:
        what = request.title or request.kind or "a tool call"
        asked: dict[str, Any] = {"confirmation_id": confirmation_id, "kind": "acp_permission", "tool": what}
        asked.update(runner=runner, command=request.command, arguments=_shown_input(request.raw_input))
        outcome = SimpleNamespace(approved=decision.approved, by="policy", option_id=decision.option_id)
        summary, details = decision_entry(asked, outcome, ctx.approval_mode)
        await ctx.audit(APPROVAL_DECIDE, summary=summary, details=details)


# -- helpers ---------------------------------------------------------------------------------------------


def _acp_error() -> type[AcpError]:
    from acp.client import AcpError

    return AcpError


def runner_spec(config: RunnerConfig, ctx: ToolContext) -> AcpRunnerSpec:
    """The runner as it will start: in the site's sandbox with the chat session's workspace as its folder
    (agents/toolservers/launch.py: its HOME for this user, the agent's network, its program shown)."""
    from acp.spec import AcpRunnerSpec

    try:
        launch = launch_fields(config, ctx, home_name=config.name)
    except SandboxRefused as exc:
        raise ToolError(f"Runner '{config.name}' could not be started: {exc}") from None
    return AcpRunnerSpec(
        **launch,
        name=config.name,
        cwd=ctx.workspace,
        timeout_seconds=config.timeout_seconds,
        trusted=config.trusted,
        tool_parse_mode=config.tool_parse_mode,
    )


def _runner_name(params: DelegateParams) -> str:
    if not params.runner:
        raise ToolError(f"Action '{params.action}' needs 'runner': the name of a runner (see action 'list').")
    return params.runner


def _message(params: DelegateParams) -> str:
    if not params.message or not params.message.strip():
        raise ToolError(f"Action '{params.action}' needs 'message': what the external agent should do.")
    return params.message


def _enabled_config(configs: dict[str, RunnerConfig], runner: str) -> RunnerConfig:
    config = configs.get(runner)
    if config is None:
        raise ToolError(_unknown(runner, configs))
    if not config.enabled:
        raise ToolError(f"Runner '{runner}' is disabled for this agent; a staff user can enable it.")
    return config


def _unknown(runner: str, configs: dict[str, RunnerConfig]) -> str:
    enabled = ", ".join(sorted(name for name, config in configs.items() if config.enabled)) or "none"
    return f"Unknown runner '{runner}'. Enabled runners: {enabled}."


def _start_failure(runner: str, exc: AcpError) -> str:
    if exc.code == "initialize_failed":
        return f"Runner '{runner}' failed to initialize, so it was not started. {exc.message}"
    return f"Runner '{runner}' could not be started. {exc.message}"


def _prompt_failure(runner: str, exc: AcpError) -> str:
    if exc.code == "crashed":
        return f"Runner '{runner}' crashed. {exc.message} Use start to run it again."
    if exc.code == "timeout":
        return f"Runner '{runner}' timed out and was stopped. {exc.message}"
    if exc.code == "protocol_error":
        return f"Runner '{runner}' broke the protocol and was stopped. {exc.message}"
    if exc.code == "runner_error":
        return f"Runner '{runner}' refused the prompt. {exc.message}"
    return exc.message


def _reply_text(runner: str, reply: str, stop_reason: str | None) -> str:
    if stop_reason == "refusal":
        raise ToolError(f"Runner '{runner}' refused the request." + (f" It said: {reply}" if reply else ""))
    if stop_reason == "cancelled":
        raise ToolError(
            f"Runner '{runner}' stopped: the prompt was cancelled."
            + (f" Partial reply: {reply}" if reply else "")
        )
    if not reply:
        return f"Runner '{runner}' finished without a reply (stop reason: {stop_reason or 'unknown'})."
    if stop_reason not in (None, "end_turn"):
        return f"{reply}\n\n(Runner '{runner}' stopped early: {stop_reason}.)"
    return reply
