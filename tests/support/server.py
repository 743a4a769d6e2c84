"""Run `manage.py serve` as a real subprocess for end-to-end tests.

With DATABASE_URL pointing at Postgres (the service-backed run) each server gets a database of its
own, created here and dropped afterwards; otherwise a SQLite file in a temporary data dir.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerEnv:
    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)

    def manage(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout


@contextmanager
def server_env(tmp_path: Path, *, database_url: str | None = None, **extra: str) -> Iterator[ServerEnv]:
    """A data dir and environment for `manage.py serve`. The data dir lives under /tmp, not in pytest's
    `tmp_path` (0700 folders): a root server's sandboxes run as another user, who must reach their
    workspace in it (`tmp_path` is kept in the signature for the callers' sake)."""
    data_dir = Path(tempfile.mkdtemp(prefix="agentsite-e2e-"))
    data_dir.chmod(0o711)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST", "DJANGO_SETTINGS"))
        and key not in {"OPENAI_API_KEY", "OPENAI_BASE_URL"}
    }
    env.update(
        DEBUG="true",
        AGENTSITE_DATA_DIR=str(data_dir),
        AGENTSITE_DEMO_DELAY="0.001",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    database_url = database_url if database_url is not None else os.environ.get("DATABASE_URL", "")
    dbname = None
    if database_url.startswith(("postgres://", "postgresql://")):
        import psycopg

        dbname = f"agentsite_e2e_{uuid.uuid4().hex[:12]}"
        admin_url = database_url.replace("postgres://", "postgresql://", 1)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        env["DATABASE_URL"] = database_url.rsplit("/", 1)[0] + f"/{dbname}"
    try:
        server = ServerEnv(data_dir=data_dir, env=env)
        server.manage("migrate", "--noinput")
        yield server
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        if dbname is not None:
            import psycopg

            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


@dataclass
class RunningServer:
    process: subprocess.Popen[str]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def serve(
    env: ServerEnv, *, port: int | None = None, kill: bool = False, args: tuple[str, ...] = ()
) -> Iterator[RunningServer]:
    """Start the server, wait until /healthz answers, stop it (SIGTERM, or SIGKILL when the test did)."""
    port = port or free_port()
    log_path = env.data_dir / f"serve-{port}-{uuid.uuid4().hex[:6]}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
        cwd=ROOT,
        env=env.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    server = RunningServer(process=process, port=port, log_path=log_path)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with {process.returncode}:\n{server.log()}")
            try:
                if httpx.get(f"{server.base_url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not answer within 30 s:\n{server.log()}")
            time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        log.close()
