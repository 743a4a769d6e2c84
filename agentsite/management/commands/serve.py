"""`manage.py serve [--host 127.0.0.1] [--port 8000]`: the ASGI server (daphne) plus the in-process scheduler.

Before it listens it checks that migrations are applied, registers the provider named in the
environment, and ends every turn the previous server left running (`result interrupted`, PROTOCOL §3.4).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

logger = logging.getLogger("agentsite.serve")


def unapplied_migrations() -> list[str]:
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _ in plan]


class Command(BaseCommand):
    help = "Serve agentsite (HTTP, WebSocket) with daphne, plus the in-process scheduler."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-scheduler", action="store_true", help="do not run the cron scheduler here")

    def handle(self, *args: Any, **options: Any) -> None:
        # daphne.server installs Twisted's asyncio reactor on import; import it before anything uses Twisted.
        from daphne.server import Server, twisted_loop

        from agents.services import provider_register_from_env
        from chat.hub import get_hub, reset_hub

        pending = unapplied_migrations()
        if pending:
            raise CommandError(
                f"{len(pending)} database migration(s) are not applied ({', '.join(pending[:3])}…). "
                "Run `python manage.py migrate` first (make run does it)."
            )
        provider_register_from_env()

        from agentsite.asgi import application

        hub = get_hub()
        interrupted = twisted_loop.run_until_complete(hub.recover_interrupted_turns())
        if interrupted:
            logger.info("ended %d turn(s) interrupted by the previous shutdown", interrupted)
        scheduler = None
        if not options["no_scheduler"]:
            scheduler = self._start_scheduler(twisted_loop)

        host, port = options["host"], options["port"]
        interface = host.strip("[]")
        endpoint = f"tcp:port={port}:interface={interface.replace(':', r'\:')}"
        self.stdout.write(f"agentsite serving on http://{host}:{port}/ (Ctrl+C to stop)")
        server = Server(
            application=application,
            endpoints=[endpoint],
            signal_handlers=True,
            websocket_max_message_size=settings.AGENTSITE_WS_MAX_FRAME_BYTES,
            websocket_max_frame_size=settings.AGENTSITE_WS_MAX_FRAME_BYTES,
            application_close_timeout=5,
            verbosity=0,
        )
        try:
            server.run()
        finally:
            if scheduler is not None:
                twisted_loop.run_until_complete(self._stop_scheduler(scheduler))
            twisted_loop.run_until_complete(reset_hub())
            self.stdout.write("agentsite stopped")

    def _start_scheduler(self, loop: Any) -> Any:
        try:
            from cron.scheduler import start_embedded_scheduler
        except ImportError:
            return None
        return start_embedded_scheduler(loop)

    async def _stop_scheduler(self, scheduler: Any) -> None:
        await scheduler.stop()
