"""What a runner sends us unasked while a prompt runs: its session updates and its permission requests.

Updates are queued as the reader reads them (it must never wait on a user's callback) and handed to
the prompt's `on_update` by one consumer task, rendered, one at a time and in arrival order. A
permission request is answered by policy when it can (`on_policy_decision` hears of it), else by the
user through `on_permission`; an option the runner did not offer counts as no answer (`cancelled`).
The connection (acp/client.py) says which callbacks and approval mode the running prompt set.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import BaseModel

from acp.clock import RunnerClock
from acp.permissions import PendingPermissions
from acp.policy import PermissionDecision, PermissionRequest, decide_permission
from acp.schema import CancelledOutcome, RequestPermissionRequest, RequestPermissionResponse, SelectedOutcome
from acp.spec import AcpRunnerSpec
from acp.updates import RenderedUpdate, render_update

logger = logging.getLogger(__name__)

OnUpdate = Callable[[RenderedUpdate], Awaitable[None] | None]
OnPermission = Callable[[PermissionRequest], Awaitable[str | None]]
OnPolicyDecision = Callable[[PermissionRequest, PermissionDecision], Awaitable[None] | None]


@dataclass(frozen=True)
class Callbacks:
    """The callbacks of the prompt running now, or a connection's defaults."""

    on_update: OnUpdate | None = None
    on_permission: OnPermission | None = None
    on_policy_decision: OnPolicyDecision | None = None

    def over(self, defaults: Callbacks) -> Callbacks:
        """These callbacks, each one not given taken from `defaults` (a prompt's over the connection's)."""
        return Callbacks(
            self.on_update or defaults.on_update,
            self.on_permission or defaults.on_permission,
            self.on_policy_decision or defaults.on_policy_decision,
        )


class UpdateFeed:
    """A runner's updates, delivered to the current `on_update` in arrival order by :meth:`deliver`."""

    def __init__(self, *, runner: str, tool_parse_mode: str, callbacks: Callable[[], Callbacks]) -> None:
        self._runner = runner
        self._tool_parse_mode = tool_parse_mode
        self._callbacks = callbacks
        self._queue: asyncio.Queue[BaseModel] = asyncio.Queue()

    def put(self, update: BaseModel) -> None:
        """Queue one update and return at once (the reader calls this, in arrival order)."""
        self._queue.put_nowait(update)

    async def drained(self) -> None:
        """Wait until every update queued so far was delivered: a prompt returns only then."""
        await self._queue.join()

    async def deliver(self) -> None:
        """The consumer task: render each update and hand it to `on_update`, one at a time, in order."""
        while True:
            update = await self._queue.get()
            try:
                rendered = render_update(update, self._tool_parse_mode)
                on_update = self._callbacks().on_update
                if rendered is not None and on_update is not None:
                    await _maybe_await(on_update(rendered))
            except Exception:
                logger.exception("on_update failed for runner %s", self._runner)
            finally:
                self._queue.task_done()


async def answer_permission(
    params: RequestPermissionRequest,
    *,
    spec: AcpRunnerSpec,
    approval_mode: str,
    callbacks: Callbacks,
    pending: PendingPermissions,
    clock: RunnerClock | None,
    closing: bool,
) -> RequestPermissionResponse:
    """Policy's answer when it has one, else the user's (the runner's clock stops while they think).

    Nobody to ask (no `on_permission`, or the connection is closing) is the `cancelled` outcome.
    """
    request = PermissionRequest.from_acp(params.tool_call, params.options)
    decision = decide_permission(
        request,
        workspace=spec.cwd,
        visible=spec.visible_cwd,
        trusted=spec.trusted,
        approval_mode=approval_mode,
    )
    if decision is not None:
        if callbacks.on_policy_decision is not None:
            with contextlib.suppress(Exception):
                await _maybe_await(callbacks.on_policy_decision(request, decision))
        return _permission_response(decision.option_id)
    if callbacks.on_permission is None or closing:
        return _permission_response(None)
    option_id = await pending.ask(callbacks.on_permission, request, pause=clock)
    return _permission_response(option_id if request.has_option(option_id) else None)


def _permission_response(option_id: str | None) -> RequestPermissionResponse:
    if option_id is None:
        return RequestPermissionResponse(outcome=CancelledOutcome())
    return RequestPermissionResponse(outcome=SelectedOutcome(option_id=option_id))


async def _maybe_await(result: Awaitable[None] | None) -> None:
    if inspect.isawaitable(result):
        await result
