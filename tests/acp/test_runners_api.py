"""ACP runner configs over REST (docs/protocol.md §2 "ACP runners"): validation, masking, permissions,
admin."""

from __future__ import annotations

import pytest
from django.conf import settings

from acp.models import AcpRunner

pytestmark = pytest.mark.django_db


BASE = "/api/v1/agents/default/config/acp"
RUNNER = {
    "enabled": True,
    "command": "claude-agent-acp",
    "args": ["--verbose"],
    "env": {"ANTHROPIC_API_KEY": "sk-secret"},
    "trusted": False,
    "tool_parse_mode": "update_detail",
    "timeout_seconds": 120,
    "sandbox_paths": ["/opt/claude"],
}


def test_put_creates_then_replaces_and_get_shows_env_values_masked(api, staff_key, alice_key):
    staff = api(staff_key)
    created = staff.put(f"{BASE}/claude", RUNNER)
    assert created.status_code == 200
    assert created.json() == {**RUNNER, "env": {"ANTHROPIC_API_KEY": "***"}}
    assert AcpRunner.objects.get(name="claude").env == {"ANTHROPIC_API_KEY": "sk-secret"}

    replaced = staff.put(f"{BASE}/claude", {"command": "goose", "args": ["acp"]})
    assert replaced.json() == {
        "enabled": False,
        "command": "goose",
        "args": ["acp"],
        "env": {},
        "trusted": False,
        "tool_parse_mode": "call_title",
        "timeout_seconds": 300,
        "sandbox_paths": [],
    }, "PUT replaces the whole runner: missing fields take their defaults"

    staff.put(f"{BASE}/gemini", {**RUNNER, "command": "gemini", "args": ["--acp"]})
    listed = api(alice_key).get(BASE)
    assert listed.status_code == 200
    assert set(listed.json()["runners"]) == {"claude", "gemini"}
    assert listed.json()["runners"]["gemini"]["env"] == {"ANTHROPIC_API_KEY": "***"}
    assert api(alice_key).get(f"{BASE}/gemini").json()["command"] == "gemini"


def test_putting_back_the_masked_env_keeps_the_stored_secret(api, staff_key):
    staff = api(staff_key)
    staff.put(f"{BASE}/claude", RUNNER)
    shown = staff.get(f"{BASE}/claude").json()
    again = staff.put(f"{BASE}/claude", {**shown, "env": {**shown["env"], "EXTRA": "1"}})
    assert again.status_code == 200
    assert AcpRunner.objects.get(name="claude").env == {"ANTHROPIC_API_KEY": "sk-secret", "EXTRA": "1"}
    unknown = staff.put(f"{BASE}/claude", {**RUNNER, "env": {"NEW": "***"}})
    assert unknown.status_code == 400 and "env" in unknown.json()["error"]["fields"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"enabled": True, "command": ""}, "command"),
        ({"enabled": True, "command": "   "}, "command"),
        ({"tool_parse_mode": "everything"}, "tool_parse_mode"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"timeout_seconds": "300"}, "timeout_seconds"),
        ({"enabled": "yes"}, "enabled"),
        ({"args": "--acp"}, "args"),
        ({"args": [1, 2]}, "args"),
        ({"env": {"KEY": 1}}, "env"),
        ({"env": ["KEY=1"]}, "env"),
        ({"comand": "typo"}, "comand"),
        ({"sandbox_paths": "/opt"}, "sandbox_paths"),
        ({"sandbox_paths": ["relative/path"]}, "sandbox_paths"),
        ({"sandbox_paths": ["/"]}, "sandbox_paths"),
        ({"sandbox_paths": [str(settings.DATA_DIR)]}, "sandbox_paths"),
        ({"sandbox_paths": [str(settings.DATA_DIR / "workspaces")]}, "sandbox_paths"),
        ({"sandbox_paths": [str(settings.BASE_DIR)]}, "sandbox_paths"),
        ({"sandbox_paths": [str(settings.BASE_DIR / "agents")]}, "sandbox_paths"),
    ],
)
def test_invalid_runners_are_refused_with_the_field_named(api, staff_key, body, field):
    response = api(staff_key).put(f"{BASE}/claude", body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and error["message"]
    # A problem inside a list or an object is named by its dotted path (`args.0`, `env.KEY`).
    assert any(name == field or name.startswith(f"{field}.") for name in error["fields"]), error
    assert not AcpRunner.objects.exists()


@pytest.mark.parametrize("name", ["has space", "dots.not.allowed", "x" * 65])
def test_runner_names_follow_the_pattern(api, staff_key, name):
    response = api(staff_key).put(f"{BASE}/{name}", RUNNER)
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "name": ["A runner name is 1-64 letters, digits, '_' or '-'."]
    }


def test_only_staff_write_and_everyone_reads(api, staff_key, alice_key):
    alice = api(alice_key)
    assert alice.put(f"{BASE}/claude", RUNNER).status_code == 403
    api(staff_key).put(f"{BASE}/claude", RUNNER)
    assert alice.get(f"{BASE}/claude").status_code == 200
    refused = alice.delete(f"{BASE}/claude")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert api(None).get(BASE).status_code == 401


def test_unknown_agent_or_runner_is_404_and_delete_removes(api, staff_key):
    staff = api(staff_key)
    for response in (
        staff.get("/api/v1/agents/ghost/config/acp"),
        staff.put("/api/v1/agents/ghost/config/acp/claude", RUNNER),
        staff.get(f"{BASE}/nope"),
        staff.delete(f"{BASE}/nope"),
    ):
        assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    staff.put(f"{BASE}/claude", RUNNER)
    assert staff.delete(f"{BASE}/claude").status_code == 204
    assert staff.get(f"{BASE}/claude").status_code == 404
    assert staff.get(BASE).json() == {"runners": {}}


def test_runners_belong_to_their_agent(api, staff_key):
    staff = api(staff_key)
    assert staff.post("/api/v1/agents", {"name": "coder"}).status_code == 201
    staff.put("/api/v1/agents/coder/config/acp/claude", RUNNER)
    assert staff.get(BASE).json() == {"runners": {}}
    assert set(staff.get("/api/v1/agents/coder/config/acp").json()["runners"]) == {"claude"}


def test_the_tool_is_listed_off_by_default_with_its_risk(api, alice_key):
    tools = {item["name"]: item for item in api(alice_key).get("/api/v1/agents/default/tools").json()}
    delegate = tools["delegate_external_agent"]
    assert delegate["enabled"] is False and delegate["risk"] == "dangerous"
    assert delegate["parameters"]["properties"]["action"]["enum"] == [
        "list",
        "status",
        "start",
        "message",
        "cancel",
        "close",
    ]


def test_admin_lists_runners_and_edits_keep_masked_env(client, staff_key, api):
    from django.contrib.auth import get_user_model

    api(staff_key).put(f"{BASE}/claude", RUNNER)
    admin = get_user_model().objects.create_superuser("root", password="pw-for-tests-123")
    client.force_login(admin)
    assert client.get("/admin/acp/acprunner/").status_code == 200
    runner = AcpRunner.objects.get(name="claude")
    page = client.get(f"/admin/acp/acprunner/{runner.pk}/change/")
    assert page.status_code == 200 and b"sk-secret" not in page.content
    form = {
        "agent": "default",
        "name": "claude",
        "enabled": "on",
        "command": "claude-agent-acp",
        "args": '["--verbose"]',
        "env": '{"ANTHROPIC_API_KEY": "***"}',
        "tool_parse_mode": "call_title",
        "timeout_seconds": "60",
    }
    saved = client.post(f"/admin/acp/acprunner/{runner.pk}/change/", form)
    assert saved.status_code == 302, saved.content[:2000]
    runner.refresh_from_db()
    assert runner.env == {"ANTHROPIC_API_KEY": "sk-secret"} and runner.timeout_seconds == 60
