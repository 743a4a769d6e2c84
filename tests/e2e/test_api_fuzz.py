"""schemathesis against a live server (issue 14, docs/protocol.md §2): every operation of the OpenAPI
document `/api/v1/schema/` is called with the document's examples, its coverage cases (boundaries, each
constraint broken in turn), generated cases and short stateful sequences, authenticated with an API key.
Every answer must conform: no 5xx, a documented status code and content type, a body (and each SSE event)
that matches the documented schema, and wrong input refused with a 4xx.

The operations are read from the served document, so an endpoint added later is fuzzed without a change
here. Settings, and the two checks left out with why: tests/e2e/schemathesis.toml. Valid cases name
objects made beforehand for the fuzzing user (tests/support/fuzz_hooks.py), so that operations reach their
real work and not only their 404.

Two servers, each with a user of its own:
- `member`, a user who is not staff: every operation but the writes of site configuration (agents,
  providers, tools, runners), which answer them 403 (tests/test_rest_agents.py). Turns run on the built-in
  demo model: no provider is configured, and a member cannot add one, so nothing leaves this machine.
- `staff`: the site configuration only. Left out: `POST /providers/{id}/test`, which connects to the
  provider's `base_url` (the fuzzer's URLs would send requests off this machine); the scheduler is off and
  nothing runs a turn, since a fuzzed provider may become the default.

On a failure the output has each case as a curl command; AGENTSITE_FUZZ_SEED=<the seed it prints> replays
the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import ROOT, RunningServer, serve, server_env

pytestmark = [pytest.mark.timeout(300)]

CONFIG = ROOT / "tests" / "e2e" / "schemathesis.toml"
SITE_CONFIGURATION = r"^/api/v1/(agents|providers)"
WRITES = r"^(POST|PUT|PATCH|DELETE)$"
# Calls that reach out (a provider's URL) or start the program a fuzzed config names (an MCP server's test).
OUTBOUND = r"^/api/v1/(providers/\{id\}|agents/\{name\}/config/mcp/\{server\})/test$"


@dataclass
class Live:
    server: RunningServer
    key: str
    seeds: dict[str, Any] = field(default_factory=dict)  # tests/support/fuzz_hooks.py says what they are
    own_key_id: str = ""

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def fuzz(self, *selection: str) -> subprocess.Popen[str]:
        """Start `st run` on this server's document (`selection`: st's --include-*/--exclude-* options);
        its report goes to `self.report`."""
        seed = os.environ.get("AGENTSITE_FUZZ_SEED")
        command = [
            *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "run"),
            f"{self.server.base_url}/api/v1/schema/?format=json",
            *("--header", f"Authorization: Bearer {self.key}"),
            *("--no-color", "--output-truncate", "false"),
            *(("--seed", seed) if seed else ()),
            *selection,
        ]
        env = {
            **os.environ,
            "SCHEMATHESIS_HOOKS": "tests.support.fuzz_hooks",
            "AGENTSITE_FUZZ_SEEDS": json.dumps(self.seeds),
            "AGENTSITE_FUZZ_OWN_KEY_ID": self.own_key_id,
            "PYTHONPATH": str(ROOT),
        }
        output = self.report.open("w")
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, text=True
        )

    @property
    def report(self) -> Path:
        return self.server.log_path.with_suffix(".schemathesis.txt")


def _ok(response: httpx.Response) -> Any:
    assert response.status_code < 300, (response.request.url, response.status_code, response.text)
    return response.json() if response.content else None


TEXT_JOB = {
    "name": "fuzz job",
    "schedule": {"type": "interval", "every_seconds": 3600},
    "task_type": "text",
    "text": "a note",
}


def _seed_member(http: httpx.Client, env: Any) -> dict[str, Any]:
    """Objects of every kind the member's operations name, made through the API; each list of names also
    holds one that names nothing, and `delete` names those kept for DELETE."""
    sessions = ("fuzz-open", "fuzz-closed", "fuzz-spare")
    for session_id in sessions:
        _ok(http.post("/api/v1/chat/sessions", json={"session_id": session_id}))
    message = {"content": "hello", "message_id": "m-1"}
    _ok(http.post("/api/v1/chat/sessions/fuzz-open/messages", json=message))
    _ok(http.delete("/api/v1/chat/sessions/fuzz-closed"))
    _ok(http.put("/api/v1/chat/sessions/fuzz-open/files/notes/todo.txt", content=b"write the tests\n"))
    jobs = [
        _ok(
            http.post(
                "/api/v1/cron/jobs", json={**TEXT_JOB, "dispatch": {"target": {"session_id": "fuzz-open"}}}
            )
        )
        for _ in range(2)
    ]
    for job in jobs:
        _ok(http.post(f"/api/v1/cron/jobs/{job['id']}/run"))
    deadline = time.monotonic() + 10
    items: list[dict[str, Any]] = []
    while len(items) < 2 and time.monotonic() < deadline:
        items = _ok(http.get("/api/v1/inbox"))["results"]
        time.sleep(0.1)
    assert len(items) == 2, "the text jobs' runs added no inbox items"
    env.manage("create_api_key", "--user", "fuzz", "--name", "spare")  # a key cannot make keys (§6.2)
    spare = next(key for key in _ok(http.get("/api/v1/auth/keys"))["results"] if key["name"] == "spare")
    return {
        "session_id": ["fuzz-open", "fuzz-closed", "no-such-session"],
        "message_id": ["m-1", "no-such-message"],
        "path": ["notes/todo.txt", "notes", "missing.txt"],
        "job_id": [jobs[0]["id"], "no-such-job"],
        "item_id": [items[0]["id"], "no-such-item"],
        "key_id": [spare["id"], "0"],
        "name": ["default", "no-such-agent"],
        "tool": ["read_file", "no_such_tool"],
        "delete": {
            "session_id": ["fuzz-spare"],
            "job_id": [jobs[1]["id"]],
            "item_id": [items[1]["id"]],
            "key_id": [spare["id"]],
        },
    }


def _seed_staff(http: httpx.Client) -> dict[str, Any]:
    for provider_id in ("fuzz-provider", "fuzz-spare"):
        body = {"id": provider_id, "name": "Fuzz", "base_url": "http://127.0.0.1:9/v1", "models": ["m"]}
        _ok(http.post("/api/v1/providers", json=body))
    _ok(http.post("/api/v1/agents", json={"name": "fuzz-spare"}))
    for runner in ("fuzz-runner", "fuzz-spare"):
        _ok(http.put(f"/api/v1/agents/default/config/acp/{runner}", json={"command": "true"}))
    for server in ("fuzz-mcp", "fuzz-spare"):
        _ok(http.put(f"/api/v1/agents/default/config/mcp/{server}", json={"command": "true"}))
    return {
        "name": ["default", "no-such-agent"],
        "tool": ["read_file", "shell", "no_such_tool"],
        "runner": ["fuzz-runner", "no-such-runner"],
        "server": ["fuzz-mcp", "no-such-server"],
        "id": ["fuzz-provider", "no-such-provider"],
        "delete": {
            "name": ["fuzz-spare"],
            "runner": ["fuzz-spare"],
            "server": ["fuzz-spare"],
            "id": ["fuzz-spare"],
        },
    }


def _key_id(http: httpx.Client, key: str) -> str:
    """The id of the key the fuzzer authenticates with (the hooks never let it be revoked)."""
    keys = _ok(http.get("/api/v1/auth/keys"))["results"]
    return next(item["id"] for item in keys if key.startswith(item["prefix"]))


@contextmanager
def _live(tmp_path: Path, *, staff: bool) -> Iterator[Live]:
    scheduler = "false" if staff else "true"
    with server_env(tmp_path, AGENTSITE_EMBEDDED_SCHEDULER=scheduler) as env:
        user = ("--user", "boss", "--staff") if staff else ("--user", "fuzz")
        key = env.manage("create_api_key", *user, "--create-user").strip()
        with serve(env) as server:
            live = Live(server=server, key=key)
            with httpx.Client(base_url=server.base_url, headers=live.headers, timeout=30) as http:
                live.seeds = _seed_staff(http) if staff else _seed_member(http, env)
                live.own_key_id = _key_id(http, key)
            yield live
            assert "Traceback" not in server.log(), server.log()[-5000:]


@dataclass
class Fuzzed:
    live: Live
    returncode: int

    @property
    def report(self) -> str:
        return self.live.report.read_text(errors="replace")


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Fuzzed]]:
    """Both servers started, and both fuzzed, side by side (two cores: about half the time)."""
    with ExitStack() as stack, ThreadPoolExecutor(2) as pool:
        starting = [
            pool.submit(stack.enter_context, _live(tmp_path_factory.mktemp(name), staff=name == "staff"))
            for name in ("member", "staff")
        ]
        member, staff = (future.result() for future in starting)
        runs = {
            "member": member.fuzz(
                *("--exclude-path-regex", SITE_CONFIGURATION), *("--exclude-method-regex", WRITES)
            ),
            "staff": staff.fuzz(
                *("--include-path-regex", SITE_CONFIGURATION), *("--exclude-path-regex", OUTBOUND)
            ),
        }
        lives = {"member": member, "staff": staff}
        try:
            yield {name: Fuzzed(lives[name], run.wait(timeout=240)) for name, run in runs.items()}
        finally:
            for run in runs.values():
                if run.poll() is None:
                    run.kill()
                    run.wait()


def _conforms(fuzzed: Fuzzed) -> None:
    report = fuzzed.report
    assert fuzzed.returncode == 0, f"schemathesis found problems:\n{report[-30000:]}"
    assert " passed" in report and "No test cases were generated" not in report, report


def test_every_operation_conforms_for_a_member(fuzzed: dict[str, Fuzzed]) -> None:
    _conforms(fuzzed["member"])
    member = fuzzed["member"].live  # and its key was never revoked, so every case ran authenticated
    assert httpx.get(f"{member.server.base_url}/api/v1/auth/keys", headers=member.headers).status_code == 200


def test_site_configuration_conforms_for_staff(fuzzed: dict[str, Fuzzed]) -> None:
    _conforms(fuzzed["staff"])


def test_the_served_document_names_the_error_shape_and_the_streams(fuzzed: dict[str, Fuzzed]) -> None:
    member = fuzzed["member"].live
    document = httpx.get(
        f"{member.server.base_url}/api/v1/schema/?format=json", headers=member.headers, timeout=30
    ).json()
    assert document["openapi"].startswith("3.1")
    assert "/api/v1/chat/ws/{session_id}" in document["info"]["description"]
    assert set(document["components"]["schemas"]["Error"]["properties"]) == {"error"}
    events = document["paths"]["/api/v1/chat/sessions/{session_id}/events"]["get"]["responses"]["200"]
    assert "text/event-stream" in events["content"]
