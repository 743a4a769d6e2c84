"""Starting and stopping a server process: what happens before it serves, whatever ASGI server runs it.

Before the first request (docs/protocol.md §3.4): the provider named in the environment is registered,
the sandbox is chosen and probed (agents/sandbox/site.py; `AGENTSITE_SANDBOX=bwrap` without a working
bubblewrap stops here), ACP runners left by a killed server are ended, the live sessions start and every
turn that no live process owns any more ends `interrupted`; then, unless told otherwise, the cron
scheduler starts in this process.

`manage.py serve` does this before it listens. Under another ASGI server, `agentsite.asgi.application`
does it on the ASGI lifespan `startup` (uvicorn, hypercorn); a server without lifespan support (plain
daphne) gets a warning on its first request saying what it misses — sessions still end their interrupted
turns when they are first used, but no scheduler runs in that process.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

logger = logging.getLogger("agentsite.serve")


class ServerProcess:
    def __init__(self) -> None:
        self.started = False
        self._scheduler: Any = None

    def prepare(self) -> None:
        """The synchronous part (call it outside an event loop, or through sync_to_async)."""
        from agents.sandbox.children import sweep_orphans
        from agents.sandbox.site import get_sandbox
        from agents.services import provider_register_from_env

        provider_register_from_env()
        get_sandbox()
        orphans = sweep_orphans(settings.DATA_DIR / "runners")
        if orphans:
            logger.info("ended %d runner(s) or MCP server(s) left by a server that was killed", len(orphans))

    async def start(self, *, scheduler: bool = True) -> None:
        """The live sessions, the recovery of interrupted turns and (`scheduler`) the embedded scheduler."""
        import asyncio

        from chat.live import live_sessions
        from cron.scheduler import start_embedded_scheduler

        live = live_sessions()
        await live.start()
        interrupted = await live.recover_interrupted_turns()
        if interrupted:
            logger.info("ended %d turn(s) interrupted by the previous shutdown", interrupted)
        if scheduler:
            self._scheduler = start_embedded_scheduler(asyncio.get_running_loop())
        self.started = True

    async def stop(self) -> None:
        from chat.live import reset_live_sessions

        if self._scheduler is not None:
            await self._scheduler.stop()
            self._scheduler = None
        await reset_live_sessions()
        self.started = False


server_process = ServerProcess()


class Lifecycle:
    """The outermost ASGI application: the lifespan protocol, and a loud word where it never comes."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._warned = False

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if not server_process.started and not self._warned:
            self._warned = True
            logger.warning(
                "agentsite was started by an ASGI server without lifespan support (e.g. plain daphne): "
                "turns interrupted by the previous stop end when their sessions are first used, and no cron "
                "scheduler runs in this process. Use `manage.py serve`, a server with ASGI lifespan "
                "(uvicorn, hypercorn), or run `manage.py runscheduler` beside it."
            )
        await self.app(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await sync_to_async(server_process.prepare)()
                    await server_process.start(scheduler=settings.AGENTSITE_EMBEDDED_SCHEDULER)
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await server_process.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return
