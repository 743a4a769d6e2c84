"""The Test button of an ACP runner (docs/protocol.md §2 "ACP runners" extension): `POST
/agents/{name}/config/acp/{runner}/test` starts the runner in the sandbox, shakes hands, reports who it is
and what it supports or why it failed, and stops it. With the real mock runner (tests/support/
mock_acp_runner.py) speaking ACP over stdio; its processes are found from /proc by their marker."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from audit.models import AuditEntry
from tests.acp.support import configure_runner, group_gone, marker_pids
from tests.support.ws import rest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

TEST = "/api/v1/agents/default/config/acp/mock_runner/test"


def gone(marker: str) -> bool:
    return all(group_gone(pid) for pid in marker_pids(marker)) and not marker_pids(marker)


async def test_a_runner_that_answers_reports_its_info_and_capabilities_and_is_stopped(
    staff_key: str, staff: Any
) -> None:
    marker = await sync_to_async(configure_runner)()

    response = await rest("POST", TEST, key=staff_key)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is True
    assert body["agent_info"] == {"name": "mock-acp-runner", "title": "Mock ACP runner", "version": "1.0.0"}
    assert body["protocol_version"] == 1
    assert body["capabilities"]["loadSession"] is True
    assert gone(marker), "the runner was stopped"
    started = await sync_to_async(lambda: list(AuditEntry.objects.filter(action="runner.start")))()
    assert [entry.details["status"] for entry in started] == ["started"]
    assert started[0].details["runner"] == "mock_runner" and started[0].user_id == staff.pk


@pytest.mark.parametrize(
    ("mode", "code", "words"),
    [
        ("fail_init_error", "initialize_failed", "mock runner refuses to initialize"),
        ("fail_init_exit", "initialize_failed", "exited with code 2 during initialize"),
        ("junk", "protocol_error", "not"),
    ],
)
async def test_a_runner_that_fails_its_handshake_says_why_and_leaves_nothing_behind(
    staff_key: str, mode: str, code: str, words: str
) -> None:
    marker = await sync_to_async(configure_runner)(mode)

    response = await rest("POST", TEST, key=staff_key)

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is False, body
    assert body["error"]["code"] == code, body
    assert "mock_runner" in body["error"]["message"] and words in body["error"]["message"], body
    assert "Traceback" not in response.text
    assert gone(marker)


async def test_a_command_that_is_not_there_is_named(staff_key: str) -> None:
    await sync_to_async(configure_runner)(command="/nonexistent/acp-runner", sandbox_paths=[])

    body = (await rest("POST", TEST, key=staff_key)).json()

    assert body["ok"] is False and body["error"]["code"] == "spawn_failed"
    assert "/nonexistent/acp-runner" in body["error"]["message"]
    statuses = await sync_to_async(
        lambda: [e.details["status"] for e in AuditEntry.objects.filter(action="runner.start")]
    )()
    assert statuses == ["failed"]


async def test_only_staff_test_a_runner_and_an_unknown_one_is_not_found(
    alice_key: str, staff_key: str
) -> None:
    marker = await sync_to_async(configure_runner)()

    refused = await rest("POST", TEST, key=alice_key)

    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert marker_pids(marker) == []
    unknown = await rest("POST", "/api/v1/agents/default/config/acp/nope/test", key=staff_key)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    no_agent = await rest("POST", "/api/v1/agents/ghost/config/acp/mock_runner/test", key=staff_key)
    assert no_agent.status_code == 404
