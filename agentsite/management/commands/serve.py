"""`manage.py serve [--host 127.0.0.1] [--port 8000] [--workers N]`: daphne plus the in-process scheduler.

Before it listens it checks that migrations are applied, registers the provider named in the
environment, and ends every turn that no live process owns any more (`result interrupted`,
docs/protocol.md §3.4). With `--workers N` (needs REDIS_URL) it opens the port once and starts N worker
processes that share it: the kernel spreads connections over them, and any socket may land on any
worker (sessions are routed to their owner, docs/architecture.md). The parent restarts a worker that dies.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import InterfaceError, OperationalError, connection
from django.db.migrations.executor import MigrationExecutor

logger = logging.getLogger("agentsite.serve")

RESTART_DELAY_SECONDS = 1.0


def unapplied_migrations() -> list[str]:
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _ in plan]


def listening_socket(host: str, port: int) -> socket.socket:
    interface = host.strip("[]")
    family = socket.AF_INET6 if ":" in interface else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((interface, port))
    sock.listen(1024)
    # Non-blocking, as Twisted requires of an adopted socket: with several processes woken for one
    # connection, the ones that lose the race must get EAGAIN, not block their event loop in accept().
    sock.setblocking(False)
    sock.set_inheritable(True)
    return sock


class Command(BaseCommand):
    help = "Serve agentsite (HTTP, WebSocket) with daphne, plus the in-process scheduler."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--workers", type=int, default=1, help="worker processes sharing the port (REDIS_URL)"
        )
        parser.add_argument("--no-scheduler", action="store_true", help="do not run the cron scheduler here")
        parser.add_argument("--fd", type=int, default=None, help=argparse_hidden())

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            pending = unapplied_migrations()
        except (OperationalError, InterfaceError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CommandError(f"The database (DATABASE_URL) does not answer: {reason}") from None
        if pending:
            raise CommandError(
                f"{len(pending)} database migration(s) are not applied ({', '.join(pending[:3])}…). "
                "Run `python manage.py migrate` first (make run does it)."
            )
        workers = options["workers"]
        if workers < 1:
            raise CommandError("--workers must be at least 1.")
        if workers > 1 and options["fd"] is None:
            if not settings.REDIS_URL:
                raise CommandError(
                    "--workers needs REDIS_URL: the processes share sessions over channels-redis "
                    "(and use DATABASE_URL=postgres://… for more than a few workers)."
                )
            self._supervise(options)
            return
        self._serve(options)

    # -- one server process ----------------------------------------------------------------

    def _serve(self, options: dict[str, Any]) -> None:
        # daphne.server installs Twisted's asyncio reactor on import; import it before anything uses Twisted.
        from daphne.server import Server, twisted_loop

        from agentsite.asgi import application
        from agentsite.lifecycle import server_process
        from agentsite.stack import STOCK_STACK

        served: Any = application
        if STOCK_STACK:  # daphne as it is, with close codes it can send (agentsite/websocket.py)
            from agentsite.websocket import CloseCodesDaphneSends

            served = CloseCodesDaphneSends(application)
        else:
            from agentsite.internals import close_websockets_by_contract

            close_websockets_by_contract()
        try:
            server_process.prepare()
        except ImproperlyConfigured as exc:  # AGENTSITE_SANDBOX=bwrap without a working bubblewrap
            raise CommandError(str(exc)) from None
        try:
            twisted_loop.run_until_complete(server_process.start(scheduler=not options["no_scheduler"]))
        except ImproperlyConfigured as exc:  # e.g. Redis at REDIS_URL does not answer
            raise CommandError(str(exc)) from None

        host, port = options["host"], options["port"]
        ipv6 = ":" in host.strip("[]")
        if options["fd"] is None:
            interface = host.strip("[]").replace(":", r"\:")
            endpoint = f"tcp:port={port}:interface={interface}"
            self.stdout.write(f"agentsite serving on http://{host}:{port}/ (Ctrl+C to stop)")
        elif not ipv6:  # a worker of --workers serves the socket its parent opened
            endpoint = f"fd:fileno={options['fd']}"
        else:
            # Twisted's `fd:` parser passes its `domain` on as text, which the reactor refuses: an IPv6
            # socket is adopted once the reactor runs instead (daphne needs some endpoint string meanwhile).
            endpoint = "unix:/nonexistent"
        server = Server(
            application=served,
            endpoints=[endpoint],
            signal_handlers=True,
            websocket_max_message_size=settings.AGENTSITE_WS_MAX_FRAME_BYTES,
            websocket_max_frame_size=settings.AGENTSITE_WS_MAX_FRAME_BYTES,
            application_close_timeout=5,
            verbosity=0,
        )
        if options["fd"] is not None and ipv6:
            adopt_listening_socket(server, options["fd"], socket.AF_INET6)
        # What start-up created (Django, apps, URL patterns: ~125k objects) lives as long as the process:
        # keep the cyclic garbage collector from scanning it again and again. A full collection otherwise
        # stops the server ~65 ms on this machine, every few seconds under load (the p99 of bench/).
        gc.collect()
        gc.freeze()
        try:
            server.run()
        finally:
            twisted_loop.run_until_complete(server_process.stop())
            self.stdout.write("agentsite stopped")

    # -- several worker processes on one port ------------------------------------------------

    def _supervise(self, options: dict[str, Any]) -> None:
        sock = listening_socket(options["host"], options["port"])
        fd = sock.fileno()
        stopping = False

        def spawn(index: int) -> subprocess.Popen[bytes]:
            command = [sys.executable, sys.argv[0], "serve", "--host", options["host"], "--fd", str(fd)]
            if index > 0 or options["no_scheduler"]:
                command.append(
                    "--no-scheduler"
                )  # one embedded scheduler is enough; claims are exactly-once anyway
            return subprocess.Popen(
                command, pass_fds=(fd,), env={**os.environ, "AGENTSITE_WORKER": str(index)}
            )

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        children = [spawn(index) for index in range(options["workers"])]
        self.stdout.write(
            f"agentsite serving on http://{options['host']}:{options['port']}/ with {len(children)} worker "
            f"processes (pids {', '.join(str(c.pid) for c in children)})"
        )
        try:
            while not stopping:
                for index, child in enumerate(children):
                    if child.poll() is not None and not stopping:
                        logger.warning(
                            "worker %d (pid %d) exited with %s; restarting",
                            index,
                            child.pid,
                            child.returncode,
                        )
                        time.sleep(RESTART_DELAY_SECONDS)
                        children[index] = spawn(index)
                time.sleep(0.2)
        finally:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 15
            for child in children:
                try:
                    child.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            sock.close()
            self.stdout.write("agentsite stopped")


def adopt_listening_socket(server: Any, fd: int, family: int) -> None:
    """Serve connections of an IPv6 socket the parent opened (`--workers`), adopted once the reactor runs."""
    from twisted.internet import reactor

    server.endpoints = []

    def adopt() -> None:
        server.listeners.append(reactor.adoptStreamPort(fd, family, server.http_factory))  # type: ignore[attr-defined]

    reactor.callWhenRunning(adopt)  # type: ignore[attr-defined]


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS
