"""`manage.py runscheduler [--interval 1.0]`: the cron scheduler alone (docs/protocol.md §5).

For deployments that run it apart from `serve`; several may run at once (each due run fires once).
SIGTERM and SIGINT stop the loop cleanly: no new claims, runs in progress end `cancelled`, exit 0.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from cron.scheduler import DEFAULT_INTERVAL, Scheduler


class Command(BaseCommand):
    help = "Run the cron scheduler (claims due jobs and runs them) until SIGTERM/SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--interval", type=float, default=DEFAULT_INTERVAL, help="seconds between checks when idle"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        asyncio.run(self._main(max(0.05, options["interval"])))
        self.stdout.write("scheduler stopped")

    async def _main(self, interval: float) -> None:
        from chat.live import reset_live_sessions

        scheduler = Scheduler(interval=interval).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        self.stdout.write(f"scheduler running (every {interval:g} s; SIGTERM or Ctrl+C to stop)")
        self.stdout.flush()
        try:
            await stop.wait()
        finally:
            await scheduler.stop()
            await reset_live_sessions()
