"""Real Redis and Postgres servers that a fault test owns: own ports, own data dirs, stopped and started
at will (the services the machine runs for everyone else are never touched).

Postgres refuses to run as root, so a root test run starts it as the `postgres` OS user (runuser).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import services_required
from tests.support.server import free_port


def missing(what: str) -> None:
    """A binary the fault tests need is not installed: a skip, or a failure in CI."""
    (pytest.fail if services_required() else pytest.skip)(what)


def _wait_port(port: int, *, up: bool, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                answering = True
        except OSError:
            answering = False
        if answering == up:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"port {port} {'never answered' if up else 'still answers'}")
        time.sleep(0.05)


class RedisInstance:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            missing("the fault tests need redis-server (Debian: apt-get install redis-server)")
        self.binary = binary
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port, up=True)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        _wait_port(self.port, up=False)


class PostgresInstance:
    def __init__(self) -> None:
        versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        if not versions:
            missing("the fault tests need PostgreSQL's server binaries (Debian: postgresql)")
        self.bin = versions[-1].parent
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="agentsite-pg-"))
        self.data = self.dir / "data"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.dir, "postgres", "postgres")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=60)

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")
        _wait_port(self.port, up=True)

    def stop(self) -> None:
        """As a crash or a failover would: at once, dropping every connection."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        _wait_port(self.port, up=False)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def redis_instance() -> Iterator[RedisInstance]:
    redis = RedisInstance()
    redis.start()
    try:
        yield redis
    finally:
        redis.kill()


@contextmanager
def postgres_instance() -> Iterator[PostgresInstance]:
    postgres = PostgresInstance()
    postgres.init()
    postgres.start()
    try:
        yield postgres
    finally:
        postgres.remove()
