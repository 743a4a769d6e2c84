"""The agent turn: model ⇄ tools until a final answer, as a TurnStream the controller drives.

One :class:`AgentTurn` answers one user message. It runs in its own task so that the
model keeps streaming while the controller fans events out, and so that :meth:`aclose`
can stop it wherever it is (streaming, running a tool, waiting for a confirmation).

The loop (docs/protocol.md §3.4/§3.5):
1. messages = system prompt + history (repaired once, agents/history.py) + the user's message;
2. each step drains steered inputs into user messages, then streams one model answer
   (``delta`` / ``thinking`` events);
3. every tool call is checked (known and enabled, arguments valid, approval policy) and
   run; refusals and failures become ``is_error`` tool results the model reads — a bad
   call never ends the turn;
4. repeat until the model answers without tool calls and no steered input is waiting.

Plain asyncio: no Django. Persistence is injected through :class:`TurnRecorder`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from agents import approvals
from agents.contract import (
    Budget,
    ChatRequest,
    ConfirmationResolvedEvent,
    InputError,
    StreamClosed,
    TurnEvent,
    TurnResult,
)
from agents.history import repair_history
from agents.llm import ModelClient, ModelError, ToolCall
from agents.recording import StepText, TurnRecorder
from agents.tools import registry as default_registry
from agents.tools.base import Tool, ToolContext, ToolError, ToolRegistry, preview_for
from agentsite.eventqueue import EventQueue
from audit.actions import APPROVAL_DECIDE

logger = logging.getLogger(__name__)

ResolvedBy = Literal["user", "timeout", "cancel", "policy"]


@dataclass(frozen=True)
class ConfirmationOutcome:
    """How a confirmation ended: approved or not, by whom, and the option chosen (ACP)."""

    approved: bool
    by: ResolvedBy
    option_id: str | None = None


@dataclass
class _Step:
    text: str
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: dict[str, int] | None


class AgentTurn:
    """A TurnStream that runs the model ⇄ tools loop for one user message."""

    def __init__(
        self,
        *,
        client: ModelClient,
        model: str,
        provider_name: str,
        system_prompt: str,
        history: list[dict[str, Any]],
        request: ChatRequest,
        tools: Sequence[Tool],
        tool_context: ToolContext,
        max_steps: int = 20,
        confirmation_timeout: float = 300.0,
        recorder: TurnRecorder | None = None,
        specs: list[dict[str, Any]] | None = None,
        disabled_tools: frozenset[str] = frozenset(),
        budget: Budget | None = None,
    ) -> None:
        """`specs`: the tools' OpenAI specs when the caller has them built already (they are the same for
        every turn of an agent; building them costs more than the rest of a turn's setup).
        `disabled_tools`: the agent's tools that are switched off, besides registered ones (a call of one
        is told so, not "unknown"). `budget`: asked before every model call after the first; its refusal
        ends the turn `error` there (docs/protocol.md §6.6)."""
        self.client = client
        self.model = model
        self.provider_name = provider_name
        self.request = request
        self.max_steps = max(1, max_steps)
        self.confirmation_timeout = confirmation_timeout
        self.recorder = recorder
        self.budget = budget
        self._tools = ToolRegistry()
        for tool in tools:
            self._tools.register(tool)
        self._disabled = disabled_tools
        self._specs = specs if specs is not None else [tool.openai_spec() for tool in self._tools.all()]
        self._messages = _initial_messages(system_prompt, history, request.content)
        self._context = replace(
            tool_context,
            approval_mode=request.approval_mode,
            emit=self._emit,
            request_permission=tool_context.request_permission or self.ask_confirmation,
        )
        self._events: EventQueue[TurnEvent | None] = EventQueue()  # events, then None at the end
        self._inputs: list[str] = []
        self._input_closed = False
        self._closed = False
        self._task: asyncio.Task[TurnResult] | None = None
        self._step = StepText(recorder)
        self._confirmations: dict[str, asyncio.Future[ConfirmationOutcome]] = {}

    # -- TurnStream: input ---------------------------------------------------------------

    def steer(self, text: str) -> None:
        """Hand a user message to the running turn; the model sees it at its next step."""
        if self._input_closed or self._closed:
            raise StreamClosed("The turn can no longer take input.")
        self._inputs.append(text)

    def consume_inputs(self) -> list[str]:
        """Take every steered text not seen yet (the loop calls this before each model step)."""
        taken, self._inputs = self._inputs, []
        return taken

    def take_pending(self) -> list[str]:
        """Close input and return the steered texts the model never saw (for the controller to restore)."""
        self._input_closed = True
        return self.consume_inputs()

    # -- TurnStream: output --------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[TurnEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[TurnEvent]:
        task = self._start()
        while True:
            event = await self._events.get()
            if event is None:
                break
            yield event
        if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]

    async def result(self) -> TurnResult:
        """The outcome; waits for the loop to end. Raises what the loop raised on a bug."""
        task = self._start()
        if task is None:
            return self._cancelled_result()
        try:
            return await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            return self._cancelled_result()

    def _cancelled_result(self) -> TurnResult:
        return TurnResult(
            status="error",
            final_content=self._step.text,
            stop_reason="cancelled",
            error={"code": "cancelled", "message": "The turn was cancelled."},
        )

    async def aclose(self) -> None:
        """Stop the turn wherever it is: pending confirmations end ``by: "cancel"``, the task is awaited."""
        if self._closed:
            return
        self._closed = True
        self._input_closed = True
        for confirmation_id in list(self._confirmations):
            self._settle(confirmation_id, ConfirmationOutcome(approved=False, by="cancel"))
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        self._events.put_nowait(None)

    # -- confirmations -------------------------------------------------------------------

    def resolve_confirmation(
        self, confirmation_id: str, approved: bool, option_id: str | None = None
    ) -> None:
        """The user's answer to a confirmation this turn is waiting on; any other id is not found.

        Only the first answer counts: the confirmation stops being pending when it is answered. Telling
        a late answer "already_resolved" is the controller's job, which remembers answered ids (bounded)
        and only forwards a reply here while the confirmation is pending.
        """
        if confirmation_id not in self._confirmations:
            raise InputError("not_found", f"Confirmation {confirmation_id} not found.")
        self._settle(confirmation_id, ConfirmationOutcome(approved=approved, by="user", option_id=option_id))

    async def ask_confirmation(
        self,
        *,
        tool: str,
        arguments: Any,
        reason: str,
        kind: Literal["tool", "acp_permission"] = "tool",
        command: str | None = None,
        options: list[dict[str, Any]] | None = None,
        preview: dict[str, Any] | None = None,
    ) -> ConfirmationOutcome:
        """Ask the user and wait for the answer, the timeout, or the turn's end. Also offered to tools as
        ``ToolContext.request_permission`` (ACP permission requests)."""
        confirmation_id = f"conf_{uuid.uuid4().hex}"
        future: asyncio.Future[ConfirmationOutcome] = asyncio.get_running_loop().create_future()
        self._confirmations[confirmation_id] = future
        data: dict[str, Any] = {"confirmation_id": confirmation_id, "kind": kind, "tool": tool}
        if command is not None:
            data["command"] = command
        data.update(arguments=arguments, reason=reason)
        if options is not None:
            data["options"] = options
        if preview is not None:
            data["preview"] = preview
        self._emit({"type": "confirmation_request", "data": data})
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=self.confirmation_timeout)
        except TimeoutError:
            if not future.done():
                self._settle(confirmation_id, ConfirmationOutcome(approved=False, by="timeout"))
            return future.result()
        finally:
            if not future.done():  # the task was cancelled some other way than aclose()
                self._settle(confirmation_id, ConfirmationOutcome(approved=False, by="cancel"))
            # Every answer is in the audit trail, also when the turn is cancelled meanwhile (shielded).
            await asyncio.shield(self.audit_decision(data, future.result()))

    async def audit_decision(self, asked: dict[str, Any], outcome: ConfirmationOutcome) -> None:
        """Every approval decision goes to the audit trail (agents/approvals.py `decision_entry`)."""
        if self._context.audit is not None:
            summary, details = approvals.decision_entry(asked, outcome, self.request.approval_mode)
            await self._context.audit(APPROVAL_DECIDE, summary=summary, details=details)

    def _settle(self, confirmation_id: str, outcome: ConfirmationOutcome) -> None:
        future = self._confirmations.pop(confirmation_id)
        future.set_result(outcome)
        event: ConfirmationResolvedEvent = {
            "type": "confirmation_resolved",
            "confirmation_id": confirmation_id,
            "approved": outcome.approved,
            "by": outcome.by,
        }
        if outcome.option_id is not None:
            event["option_id"] = outcome.option_id
        self._emit(event)

    # -- the loop --------------------------------------------------------------------------

    def _start(self) -> asyncio.Task[TurnResult] | None:
        """Start the loop on first use; a turn closed before that never starts (None)."""
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._run(), name=f"turn-{self.request.message_id}")
        return self._task

    def _emit(self, event: TurnEvent) -> None:
        self._events.put_nowait(event)

    async def _run(self) -> TurnResult:
        try:
            return await self._loop()
        except asyncio.CancelledError:
            await asyncio.shield(self._step.ended("cancelled"))  # what was streamed stays in the history
            raise
        finally:
            self._input_closed = True
            self._events.put_nowait(None)

    async def _loop(self) -> TurnResult:
        usage: dict[str, int] | None = None
        step = _Step("", [], None, None)
        for index in range(self.max_steps):
            if index and self.budget is not None and (refusal := await self.budget()) is not None:
                # Past the budget: no more model calls. Steered input not taken yet goes back to the queue.
                self._input_closed = True
                return TurnResult(
                    status="error",
                    final_content=step.text,
                    stop_reason="error",
                    usage=usage,
                    error=dict(refusal),
                )
            self._messages.extend({"role": "user", "content": text} for text in self.consume_inputs())
            if index == self.max_steps - 1:
                self._input_closed = True  # no step left to show the model a later steer
            try:
                step = await self._model_step()
            except ModelError as exc:
                await self._step.ended("error")
                return TurnResult(
                    status="error",
                    final_content=self._step.text,
                    stop_reason="error",
                    usage=usage,
                    error=exc.to_dict(),
                )
            usage = _add_usage(usage, step.usage)
            await self._record_assistant(step)
            if not step.tool_calls:
                if self._inputs:
                    continue  # the user steered while the model answered: one more step
                self._input_closed = True
                return TurnResult(
                    status="completed",
                    final_content=step.text,
                    stop_reason=step.finish_reason or "stop",
                    usage=usage,
                )
            last = index == self.max_steps - 1
            for call in step.tool_calls:
                await self._handle_tool_call(call, skip=last)
        self._input_closed = True
        return TurnResult(status="completed", final_content=step.text, stop_reason="max_steps", usage=usage)

    async def _model_step(self) -> _Step:
        self._step.start()
        final = None
        generation = (self.request.config or {}).get("generation")
        stream = self.client.stream_chat(
            model=self.model,
            messages=self._messages,
            tools=self._specs or None,
            generation=generation if isinstance(generation, dict) else None,
        )
        first = True
        async for chunk in stream:
            if chunk.content:
                self._step.parts.append(chunk.content)
                self._emit({"type": "delta", "content": chunk.content})
                if self._step.progress_due():
                    await self._step.progress()
                if first:
                    # The first words go out before the rest of a reply whose chunks are all here already
                    # (buffered, or a fast model): other sessions' new answers start in the meantime.
                    first = False
                    await asyncio.sleep(0)
            if chunk.reasoning:
                self._step.reasoning.append(chunk.reasoning)
                self._emit({"type": "thinking", "content": chunk.reasoning})
            if chunk.done:
                final = chunk
        if final is None:
            raise ModelError(
                "stream_broken",
                f"The answer from provider '{self.provider_name}' for model '{self.model}' ended early.",
            )
        return _Step(self._step.text, final.tool_calls, final.finish_reason, final.usage)

    async def _record_assistant(self, step: _Step) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
        calls = [call.to_openai() for call in step.tool_calls]
        if calls:
            message["tool_calls"] = calls
        self._messages.append(message)
        await self._step.completed(calls, step.usage)

    async def _handle_tool_call(self, call: ToolCall, *, skip: bool) -> None:
        self._emit(
            {"type": "tool_call", "call_id": call.id, "name": call.name, "arguments": _shown_arguments(call)}
        )
        if skip:
            output = f"Not run: the turn reached its limit of {self.max_steps} model steps."
            is_error = True
        else:
            output, is_error = await self._execute(call)
        self._emit(
            {
                "type": "tool_result",
                "call_id": call.id,
                "name": call.name,
                "output": output,
                "is_error": is_error,
            }
        )
        self._messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        if self.recorder is not None:
            await self.recorder.tool_result(call.id, call.name, output, is_error)

    async def _execute(self, call: ToolCall) -> tuple[str, bool]:
        """Validate, apply the approval policy, run. Returns (output, is_error)."""
        known = call.name in self._disabled or default_registry.get(call.name) is not None
        if self._tools.get(call.name) is None and known:
            return (
                f"Tool '{call.name}' is disabled for this agent. Use another tool or answer without it.",
                True,
            )
        try:
            tool, params = self._tools.parse(call.name, call.arguments)
        except ToolError as exc:
            return str(exc), True
        verdict = approvals.evaluate(tool, params, self.request.approval_mode)
        if verdict.decision != "ask" and tool.risk_for(params) == "dangerous":  # by policy: audited too
            asked = dict(kind="tool", tool=tool.name, command=tool.describe(params), reason=verdict.reason)
            outcome = ConfirmationOutcome(approved=verdict.decision == "allow", by="policy")
            await self.audit_decision({**asked, "arguments": _shown_arguments(call)}, outcome)
        if verdict.decision == "refuse":
            return verdict.reason, True
        if verdict.decision == "ask":
            outcome = await self.ask_confirmation(
                tool=tool.name,
                arguments=_shown_arguments(call),
                reason=verdict.reason,
                command=tool.describe(params),
                preview=await preview_for(tool, params, self._context.workspace),
            )
            if not outcome.approved:
                return self._refusal_text(outcome), True
        return await self._invoke(tool, params, call.id)

    def _refusal_text(self, outcome: ConfirmationOutcome) -> str:
        if outcome.by == "timeout":
            return f"Refused: nobody answered the confirmation within {self.confirmation_timeout:g} seconds."
        if outcome.by == "cancel":
            return "Refused: the turn was cancelled."
        return "Refused by the user."

    async def _invoke(self, tool: Tool, params: Any, call_id: str) -> tuple[str, bool]:
        # extras["call_id"]: the id of this tool call, for tools that stream events about it
        # (delegate_external_agent's `delegate_update`, docs/protocol.md §3.3).
        context = replace(self._context, extras={**self._context.extras, "call_id": call_id})
        try:
            return await tool.run(params, context), False
        except ToolError as exc:
            return str(exc), True
        except Exception as exc:  # a tool bug must not end the turn; the model and the log see it
            logger.exception("tool %s failed", tool.name)
            return f"Tool '{tool.name}' failed unexpectedly ({type(exc).__name__}: {exc}).", True


def _initial_messages(
    system_prompt: str, history: list[dict[str, Any]], content: str
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.extend(repair_history(history))
    messages.append({"role": "user", "content": content})
    return messages


def _shown_arguments(call: ToolCall) -> Any:
    """The arguments as an object when they are a JSON object, else the raw text the model sent."""
    try:
        decoded = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return call.arguments
    return decoded if isinstance(decoded, dict) else call.arguments


def _add_usage(total: dict[str, int] | None, step: dict[str, int] | None) -> dict[str, int] | None:
    if step is None:
        return total
    summed = dict(total or {})
    for key, value in step.items():
        summed[key] = summed.get(key, 0) + value
    return summed
