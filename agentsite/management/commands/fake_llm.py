"""`manage.py fake_llm [--port N]`: an OpenAI-compatible scripted model server for demos and tests."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Serve a scripted OpenAI-compatible model (echoes the last user message unless scripted)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8001)

    def handle(self, *args: Any, **options: Any) -> None:
        from agentsite.dev.fake_llm import serve

        self.stdout.write(f"fake LLM on http://{options['host']}:{options['port']}/v1")
        try:
            asyncio.run(serve(options["host"], options["port"]))
        except KeyboardInterrupt:
            pass
