"""A non-staff user's agent on a real server reaches nothing but its own workspace (docs/protocol.md §6.1).

The fake model (its own process) forces `shell` calls in approval mode `full_access`, as a user who is
not staff may ask for. With the sandbox, each probe shows nothing of the server, reaches nothing, and
leaves nothing running (looked for in the host's /proc). With `AGENTSITE_SANDBOX=none` the same user
gets a refusal and nothing runs, while a superuser's command runs.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from agentsite.dev.fake_llm import Reply, script_remote
from tests.support.processes import gone, marker
from tests.support.sandboxes import sandbox_of
from tests.support.server import RunningServer, ServerEnv, serve, server_env

pytestmark = [pytest.mark.timeout(180)]

CANARY = f"canary-{uuid.uuid4().hex}"


def shell_call(command: str) -> Reply:
    return Reply(tool_calls=[{"name": "shell", "arguments": {"command": command, "timeout_seconds": 20}}])


async def run_shell(http: httpx.AsyncClient, llm: str, session_id: str, command: str) -> dict[str, Any]:
    """One turn in which the model runs `command`; the stored tool row (content, status...)."""
    script_remote(llm, shell_call(command), Reply(text="done"))
    body = {"content": "run it", "approval_mode": "full_access"}
    posted = await http.post(f"/api/v1/chat/sessions/{session_id}/messages", json=body)
    assert posted.status_code == 202, posted.text
    message_id = posted.json()["message_id"]
    async with asyncio.timeout(60):
        while True:
            history = (await http.get(f"/api/v1/chat/sessions/{session_id}/messages")).json()["results"]
            mine = next(m for m in history if m["message_id"] == message_id and m["role"] == "user")
            if mine["status"] not in ("pending", "running"):
                assert mine["status"] == "completed", mine
                return [m for m in history if m["role"] == "tool" and m.get("reply_to") == message_id][-1]
            await asyncio.sleep(0.1)


async def configure_model(server: RunningServer, staff_key: str, llm: str) -> None:
    headers = {"Authorization": f"Bearer {staff_key}"}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=10) as http:
        provider = {"id": "fake", "name": "Fake", "base_url": llm, "api_key": "sk-x", "models": ["m"]}
        assert (await http.post("/api/v1/providers", json=provider)).status_code == 201
        active = await http.put("/api/v1/providers/active", json={"provider_id": "fake", "model": "m"})
        assert active.status_code == 200


def user_key(env: ServerEnv, name: str, *options: str) -> str:
    return env.manage("create_api_key", "--user", name, "--create-user", *options).strip()


async def test_a_users_commands_see_reach_and_outlive_nothing(tmp_path, fake_llm_process) -> None:
    sandbox_of("bwrap")  # skips (or fails in CI) where bubblewrap does not work
    llm = fake_llm_process.base_url
    extra = {"AGENTSITE_CANARY": CANARY, "AGENTSITE_SANDBOX": "bwrap", "AGENTSITE_SANDBOX_FILE_SIZE_MB": "64"}
    with server_env(tmp_path, **extra) as env:
        staff_key = user_key(env, "root", "--staff")
        alice_key = user_key(env, "alice")
        with serve(env) as server:
            await configure_model(server, staff_key, llm)
            health = httpx.get(f"{server.base_url}/healthz").json()
            assert health["details"]["sandbox"]["mode"] == "bwrap"
            headers = {"Authorization": f"Bearer {alice_key}"}
            async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=10) as http:
                session_id = (await http.post("/api/v1/chat/sessions", json={})).json()["session_id"]

                async def probe(command: str) -> str:
                    row = await run_shell(http, llm, session_id, command)
                    return str(row["content"])

                environment = await probe("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
                assert CANARY not in environment and "SECRET_KEY" not in environment

                data = env.data_dir
                listing = await probe(f"ls -la {data} {data}/workspaces 2>&1; ls / ; true")
                assert "No such file or directory" in listing and "agentsite.sqlite3" not in listing
                database = await probe(f"head -c 64 {data}/agentsite.sqlite3 2>&1 | od -c | head -2; true")
                assert "SQLite format" not in database and "S   Q   L" not in database

                code = "import socket,sys\nfor port in sys.argv[1:]:\n"
                code += (
                    "    try: socket.create_connection(('127.0.0.1', int(port)), 2); print('REACHED', port)\n"
                )
                code += "    except OSError as e: print('refused', port, e)\n"
                ports = f"{server.port} 5432 6379"
                network = await probe(f"printf '%s' \"{code}\" > probe.py; python3 probe.py {ports}")
                assert "REACHED" not in network and network.count("Connection refused") == 3

                first, second = marker(), marker()
                survivors = await probe(f"setsid sleep {first} & (sh -c 'sleep {second} &' &); echo started")
                assert "started" in survivors
                assert gone(first) and gone(second), "nothing the call started outlives it"

                loop_tag = marker()
                fork_loop = await probe(f"i=0; while [ $i -lt 2000 ]; do sleep {loop_tag} & i=$((i+1)); done")
                assert "fork" in fork_loop.lower() or "resource" in fork_loop.lower()
                assert gone(loop_tag)

                big = await probe("dd if=/dev/zero of=big bs=1M count=2048 2>&1 | tail -1; ls -l big")
                assert "File size limit exceeded" in big
                listing_line = next(line for line in big.splitlines() if line.endswith(" big"))
                assert int(listing_line.split()[4]) <= 64 * 1024 * 1024, big
        assert server.process.returncode is not None


async def test_without_a_sandbox_only_holders_of_the_permission_run_commands(
    tmp_path, fake_llm_process
) -> None:
    llm = fake_llm_process.base_url
    with server_env(tmp_path, AGENTSITE_SANDBOX="none") as env:
        staff_key = user_key(env, "staffer", "--staff")  # staff, but without agents.run_unsandboxed
        alice_key = user_key(env, "alice")
        env.manage(
            "shell",
            "-c",
            "from django.contrib.auth.models import User; User.objects.filter(username='boss')"
            ".exists() or User.objects.create_superuser('boss', 'boss@example.com', 'pw-not-used-9')",
        )
        boss_key = user_key(env, "boss")
        with serve(env) as server:
            await configure_model(server, staff_key, llm)
            assert httpx.get(f"{server.base_url}/healthz").json()["details"]["sandbox"]["mode"] == "none"
            for key, allowed in [(alice_key, False), (staff_key, False), (boss_key, True)]:
                headers = {"Authorization": f"Bearer {key}"}
                async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=10) as http:
                    session_id = (await http.post("/api/v1/chat/sessions", json={})).json()["session_id"]
                    row = await run_shell(http, llm, session_id, "echo ran > proof.txt; echo ran")
                if allowed:
                    assert row["content"].startswith("ran"), row
                else:
                    assert row["status"] == "error" or "no sandbox for commands" in row["content"], row
                    assert "no sandbox for commands" in row["content"]
                    assert "agents.run_unsandboxed" in row["content"]
            workspaces = list((env.data_dir / "workspaces").glob("*/proof.txt"))
            assert len(workspaces) == 1, "only the superuser's command ran"
