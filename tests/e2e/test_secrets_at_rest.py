"""End to end on a real `manage.py serve` (docs/protocol.md §6.3): a provider key and a runner env value
put in over REST never reach the database in clear — not the SQLite file, not its WAL or shared-memory
file while the server runs, not a `pg_dump` of the Postgres database in the service-backed run — and the
key still works (the model server answers only to it). The files the server made are its own user's.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from tests.support.server import ServerEnv, serve, server_env

pytestmark = [pytest.mark.services_rerun, pytest.mark.timeout(120)]

CANARY_KEY = "sk-canary-key-5b7e2f"
CANARY_ENV = "canary-env-value-91c3"
PROVIDER_ID = "canaryprovider"


async def _turn(http: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    posted = await http.post(f"/api/v1/chat/sessions/{session_id}/messages", json={"content": "hello"})
    assert posted.status_code == 202, posted.text
    message_id = posted.json()["message_id"]
    async with asyncio.timeout(30):
        while True:
            history = (await http.get(f"/api/v1/chat/sessions/{session_id}/messages")).json()["results"]
            mine = next(m for m in history if m["message_id"] == message_id and m["role"] == "user")
            if mine["status"] not in ("pending", "running"):
                return dict(mine)
            await asyncio.sleep(0.1)


def _stored_bytes(env: ServerEnv) -> bytes:
    """Everything the database holds, as bytes: the SQLite files, or a pg_dump of the server's database."""
    database_url = env.env.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        if shutil.which("pg_dump") is None:
            pytest.skip("pg_dump is not installed")
        dump = subprocess.run(["pg_dump", database_url], capture_output=True, timeout=60, check=True)
        return dump.stdout
    files = [env.data_dir / f"agentsite.sqlite3{suffix}" for suffix in ("", "-wal", "-shm")]
    wal = files[1]
    assert wal.exists() and wal.stat().st_size > 0, "the WAL holds the latest writes while the server runs"
    return b"".join(path.read_bytes() for path in files if path.exists())


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _check_modes(env: ServerEnv) -> None:
    data_dir = env.data_dir
    assert _mode(data_dir) & 0o066 == 0, "nobody else may list the data directory"
    private = [data_dir / "secret_key", *data_dir.glob("agentsite.sqlite3*")]
    assert {path.name: _mode(path) for path in private} == {path.name: 0o600 for path in private}
    sandbox_user = settings.AGENTSITE_SANDBOX_UID != os.geteuid()
    workspaces = data_dir / "workspaces"
    assert _mode(workspaces) == (0o711 if sandbox_user else 0o700)  # pass through, never list
    for workspace in workspaces.iterdir():
        assert _mode(workspace) == 0o700
        assert workspace.stat().st_uid == (settings.AGENTSITE_SANDBOX_UID if sandbox_user else os.geteuid())


async def test_secrets_put_in_over_rest_are_never_stored_in_clear_and_still_work(tmp_path, fake_llm):
    fake_llm.api_key = CANARY_KEY  # the model server answers only to the stored key
    with server_env(tmp_path) as env:
        key = env.manage("create_api_key", "--user", "root", "--create-user", "--staff").strip()
        with serve(env) as server:
            headers = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=15) as http:
                provider = {
                    "id": PROVIDER_ID,
                    "name": "Canary",
                    "base_url": fake_llm.base_url,
                    "api_key": CANARY_KEY,
                    "models": ["fake-model"],
                }
                assert (await http.post("/api/v1/providers", json=provider)).status_code == 201
                active = {"provider_id": PROVIDER_ID, "model": "fake-model"}
                assert (await http.put("/api/v1/providers/active", json=active)).status_code == 200
                runner = {"enabled": False, "command": "", "env": {"CANARY_TOKEN": CANARY_ENV}}
                put = await http.put("/api/v1/agents/default/config/acp/canary", json=runner)
                assert put.status_code == 200, put.text

                tested = (await http.post(f"/api/v1/providers/{PROVIDER_ID}/test")).json()
                session_id = (await http.post("/api/v1/chat/sessions", json={})).json()["session_id"]
                turn = await _turn(http, session_id)
                listed = (await http.get("/api/v1/providers")).json()["results"]
                runners = (await http.get("/api/v1/agents/default/config/acp")).json()["runners"]

                stored = _stored_bytes(env)
            _check_modes(env)

    assert tested == {"ok": True, "models": ["fake-model", "fake-model-large"]}
    assert turn["status"] == "completed", turn
    assert listed[0]["api_key_set"] is True and "api_key" not in listed[0]
    assert runners["canary"]["env"] == {"CANARY_TOKEN": "***"}
    assert PROVIDER_ID.encode() in stored and b"CANARY_TOKEN" in stored, "the rows are in what was read"
    assert b"config.create" in stored, "and so is the audit trail of their writes (masked, §6.4)"
    assert CANARY_KEY.encode() not in stored
    assert CANARY_ENV.encode() not in stored
