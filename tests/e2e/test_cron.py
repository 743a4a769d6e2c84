"""End to end: the seed's cron flow against a real `manage.py serve` process (with its embedded scheduler)
and a fake model server in another process, over REST only.

An agent job that never fires by itself (`0 0 1 1 *`) is run now; its history is polled until `success`;
the answer is in the target session and in the inbox. The model answering 500 gives `failure` and an
error item in the inbox.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from agentsite.dev.fake_llm import Reply, script_remote
from tests.support.server import serve, server_env

pytestmark = pytest.mark.services_rerun

NEVER_FIRE = "0 0 1 1 *"


def agent_spec(name: str, *, save_inbox: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "enabled": True,
        "schedule": {"type": "cron", "cron": NEVER_FIRE, "timezone": "UTC"},
        "task_type": "agent",
        "request": {
            "input": [
                {"role": "user", "type": "message", "content": [{"type": "text", "text": "List ACP runners"}]}
            ]
        },
        "dispatch": {
            "type": "channel",
            "channel": "console",
            "target": {"user_id": "alice", "session_id": f"console:acp-{name}-sess"},
            "mode": "stream",
        },
        "save_result_to_inbox": save_inbox,
    }


def wait_cron_executed(http: httpx.Client, job_id: str, *, within: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + within
    while True:
        runs = http.get(f"/api/v1/cron/jobs/{job_id}/history").json()["results"]
        if runs and runs[0]["status"] != "running":
            return list(runs)
        assert time.monotonic() < deadline, runs
        time.sleep(0.1)


def test_cron_run_now_over_rest_success_then_a_failing_model(tmp_path, fake_llm_process) -> None:  # type: ignore[no-untyped-def]
    with server_env(tmp_path) as env:
        staff = env.manage("create_api_key", "--user", "root", "--create-user", "--staff").strip()
        key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
        with serve(env) as server:
            admin = httpx.Client(
                base_url=server.base_url, headers={"Authorization": f"Bearer {staff}"}, timeout=15
            )
            http = httpx.Client(
                base_url=server.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=15
            )
            provider = {
                "id": "mock",
                "name": "Mock",
                "base_url": fake_llm_process.base_url,
                "models": ["fake-model"],
            }
            assert admin.post("/api/v1/providers", json=provider).status_code in (200, 201)
            assert (
                admin.put(
                    "/api/v1/providers/active", json={"provider_id": "mock", "model": "fake-model"}
                ).status_code
                == 200
            )
            script_remote(fake_llm_process.base_url, Reply(text="mock reply: no runners configured"))

            created = http.post("/api/v1/cron/jobs", json=agent_spec("list_smoke"))
            assert created.status_code == 200, server.log()
            job_id = created.json()["id"]
            started = http.post(f"/api/v1/cron/jobs/{job_id}/run")
            assert started.status_code == 202, server.log()
            records = wait_cron_executed(http, job_id)

            assert records[0]["status"] == "success", f"{records[0]} | {server.log()}"
            assert records[0]["run_id"] == started.json()["run_id"]
            assert records[0]["response"] == "mock reply: no runners configured"
            history = http.get("/api/v1/chat/sessions/console:acp-list_smoke-sess/messages").json()["results"]
            assert [m["role"] for m in history] == ["user", "assistant"]
            assert history[1]["content"] == "mock reply: no runners configured"
            inbox = http.get("/api/v1/inbox?unread_only=true").json()["results"]
            assert [(i["severity"], i["body"]) for i in inbox] == [
                ("info", "mock reply: no runners configured")
            ]
            assert http.post("/api/v1/inbox/read", json={"all": True}).json() == {"updated": 1}

            script_remote(fake_llm_process.base_url, *[Reply(status=500, retry_after_ms=1)] * 3)
            failing = http.post("/api/v1/cron/jobs", json=agent_spec("fails", save_inbox=False)).json()["id"]
            http.post(f"/api/v1/cron/jobs/{failing}/run")
            records = wait_cron_executed(http, failing)

            assert records[0]["status"] == "failure", f"{records[0]} | {server.log()}"
            assert records[0]["error"]
            unread = http.get("/api/v1/inbox?unread_only=true").json()["results"]
            assert [(i["severity"], i["status"], i["payload"]["job_id"]) for i in unread] == [
                ("error", "failure", failing)
            ]
            assert http.delete(f"/api/v1/cron/jobs/{job_id}").status_code == 200
