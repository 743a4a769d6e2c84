"""Per-agent tool switches over REST (docs/protocol.md §2): list, toggle, idempotent PUT; staff writes
only."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

BUILTINS = {"get_current_time", "list_files", "read_file", "write_file", "shell"}


def test_every_user_lists_the_tools_with_defaults_and_risk(api, alice_key):
    response = api(alice_key).get("/api/v1/agents/default/tools")
    assert response.status_code == 200
    items = {item["name"]: item for item in response.json()}
    assert BUILTINS <= set(items)
    assert items["shell"]["risk"] == "dangerous" and items["shell"]["enabled"] is True
    assert items["read_file"]["risk"] == "safe"
    assert items["write_file"]["parameters"]["type"] == "object"
    assert set(items["write_file"]["parameters"]["required"]) == {"path", "content"}


def test_toggle_flips_and_put_sets_idempotently(api, staff_key):
    client = api(staff_key)
    flipped = client.patch("/api/v1/agents/default/tools/shell/toggle")
    assert flipped.status_code == 200 and flipped.json()["enabled"] is False
    assert client.patch("/api/v1/agents/default/tools/shell/toggle").json()["enabled"] is True
    for _ in range(2):
        response = client.put("/api/v1/agents/default/tools/shell", {"enabled": False})
        assert response.status_code == 200 and response.json()["enabled"] is False
    listed = {item["name"]: item["enabled"] for item in client.get("/api/v1/agents/default/tools").json()}
    assert listed["shell"] is False and listed["read_file"] is True


def test_switches_are_per_agent(api, staff_key):
    client = api(staff_key)
    assert client.post("/api/v1/agents", {"name": "coder"}).status_code == 201
    client.put("/api/v1/agents/coder/tools/shell", {"enabled": False})
    default = {i["name"]: i["enabled"] for i in client.get("/api/v1/agents/default/tools").json()}
    assert default["shell"] is True


def test_non_staff_cannot_switch_tools(api, alice_key):
    response = api(alice_key).put("/api/v1/agents/default/tools/shell", {"enabled": False})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert api(alice_key).patch("/api/v1/agents/default/tools/shell/toggle").status_code == 403


def test_unknown_tool_or_agent_is_404_and_bad_bodies_are_400(api, staff_key):
    client = api(staff_key)
    assert (
        client.put("/api/v1/agents/default/tools/nope", {"enabled": True}).json()["error"]["code"]
        == "not_found"
    )
    assert client.get("/api/v1/agents/ghost/tools").status_code == 404
    bad = client.put("/api/v1/agents/default/tools/shell", {"enabled": "yes"})
    assert bad.status_code == 400
    assert "enabled" in bad.json()["error"]["fields"]
