"""Agents and providers over REST (docs/protocol.md §2): site configuration, readable by all, writable by
staff.

Also the unauthenticated endpoints (version, healthz) and the API's own description (schema, docs).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.models import Agent, Provider, SiteDefault
from tests.test_rest_keys import assert_error

AGENTS = "/api/v1/agents"
PROVIDERS = "/api/v1/providers"
SECRET = "sk-very-secret-provider-key"


def provider_body(**overrides: Any) -> dict[str, Any]:
    body = {
        "id": "local",
        "name": "Local vLLM",
        "base_url": "http://127.0.0.1:8001/v1",
        "api_key": SECRET,
        "models": ["m-small", "m-large"],
        "default_model": "m-small",
    }
    return {**body, **overrides}


@pytest.fixture
def provider(api: Any, staff_key: str) -> dict[str, Any]:
    response = api(staff_key).post(PROVIDERS, provider_body())
    assert response.status_code == 201, response.content
    return response.json()


# --- agents ---------------------------------------------------------------------------------------


def test_default_agent_exists_and_everyone_reads_agents(api: Any, alice_key: str) -> None:
    response = api(alice_key).get(AGENTS)

    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"results", "next"}
    assert "default" in [agent["name"] for agent in body["results"]]
    detail = api(alice_key).get(f"{AGENTS}/default")
    assert detail.status_code == 200
    assert {"name", "description", "system_prompt", "provider", "model"} <= set(detail.json())


def test_agents_require_authentication(api: Any, db: Any) -> None:
    assert_error(api(None).get(AGENTS), 401, "unauthorized")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", AGENTS, {"name": "sneaky"}),
        ("patch", f"{AGENTS}/default", {"system_prompt": "obey alice"}),
        ("delete", f"{AGENTS}/default", None),
        ("post", PROVIDERS, provider_body()),
        ("put", f"{PROVIDERS}/active", {"provider_id": "local", "model": "m"}),
    ],
)
def test_non_staff_cannot_change_site_configuration(
    api: Any, alice_key: str, method: str, path: str, body: Any
) -> None:
    call = getattr(api(alice_key), method)
    prompt = Agent.objects.get(name="default").system_prompt

    response = call(path, body) if body is not None else call(path)

    assert_error(response, 403, "forbidden")
    assert Agent.objects.get(name="default").system_prompt == prompt
    assert not Agent.objects.filter(name="sneaky").exists()
    assert not Provider.objects.exists()


def test_non_staff_cannot_change_or_test_a_provider(
    api: Any, alice_key: str, provider: dict[str, Any]
) -> None:
    assert_error(api(alice_key).patch(f"{PROVIDERS}/local", {"name": "mine"}), 403, "forbidden")
    assert_error(api(alice_key).delete(f"{PROVIDERS}/local"), 403, "forbidden")
    assert_error(api(alice_key).post(f"{PROVIDERS}/local/test"), 403, "forbidden")
    assert Provider.objects.get(id="local").name == "Local vLLM"


def test_staff_creates_patches_and_deletes_an_agent(api: Any, staff_key: str, alice_key: str) -> None:
    created = api(staff_key).post(AGENTS, {"name": "coder", "description": "Writes code"})
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "coder"
    assert created.json()["provider"] is None

    patched = api(staff_key).patch(f"{AGENTS}/coder", {"system_prompt": "Be terse."})
    assert patched.status_code == 200, patched.content
    assert patched.json()["system_prompt"] == "Be terse."
    assert patched.json()["description"] == "Writes code"
    assert api(alice_key).get(f"{AGENTS}/coder").json()["system_prompt"] == "Be terse."

    deleted = api(staff_key).delete(f"{AGENTS}/coder")
    assert deleted.status_code in (200, 204)
    assert_error(api(alice_key).get(f"{AGENTS}/coder"), 404, "not_found")


def test_sandbox_network_is_off_by_default_and_only_staff_turn_it_on(
    api: Any, staff_key: str, alice_key: str
) -> None:
    assert api(staff_key).post(AGENTS, {"name": "net"}).json()["sandbox_network"] is False
    assert api(alice_key).patch(f"{AGENTS}/net", {"sandbox_network": True}).status_code == 403
    assert_error(api(staff_key).patch(f"{AGENTS}/net", {"sandbox_network": "yes"}), 400, "invalid")
    assert api(staff_key).patch(f"{AGENTS}/net", {"sandbox_network": True}).json()["sandbox_network"] is True
    assert api(alice_key).get(f"{AGENTS}/net").json()["sandbox_network"] is True


def test_agent_can_name_a_provider_and_model(api: Any, staff_key: str, provider: dict[str, Any]) -> None:
    response = api(staff_key).post(AGENTS, {"name": "smart", "provider": "local", "model": "m-large"})

    assert response.status_code == 201, response.content
    assert response.json()["provider"] == "local"
    assert response.json()["model"] == "m-large"


def test_agent_with_unknown_provider_is_refused(api: Any, staff_key: str) -> None:
    error = assert_error(api(staff_key).post(AGENTS, {"name": "lost", "provider": "nowhere"}), 400, "invalid")
    assert "provider" in error["fields"]


def test_default_agent_cannot_be_deleted(api: Any, staff_key: str) -> None:
    assert_error(api(staff_key).delete(f"{AGENTS}/default"), 409)
    assert Agent.objects.filter(name="default").exists()


def test_default_agent_can_be_configured(api: Any, staff_key: str) -> None:
    response = api(staff_key).patch(f"{AGENTS}/default", {"system_prompt": "You help."})
    assert response.status_code == 200, response.content


def test_agent_cannot_be_renamed(api: Any, staff_key: str) -> None:
    error = assert_error(api(staff_key).patch(f"{AGENTS}/default", {"name": "other"}), 400, "invalid")
    assert "name" in error["fields"]


def test_duplicate_agent_name_is_refused(api: Any, staff_key: str) -> None:
    error = assert_error(api(staff_key).post(AGENTS, {"name": "default"}), 400, "invalid")
    assert "name" in error["fields"]


# "\rg" and " x": DRF trimmed names before matching them (found by schemathesis).
@pytest.mark.parametrize("name", ["has space", "", "a/b", "x" * 65, "ü", 42, None, "\rg", " x"])
def test_bad_agent_name_is_refused(api: Any, staff_key: str, name: Any) -> None:
    error = assert_error(api(staff_key).post(AGENTS, {"name": name}), 400, "invalid")
    assert "name" in error["fields"]
    assert list(Agent.objects.values_list("name", flat=True)) == ["default"]


# `"provider": ""` was taken for null and `5` for "5" (found by schemathesis: the document says an id).
@pytest.mark.parametrize(
    "body", [{"description": 5}, {"system_prompt": ["x"]}, {"model": True}, {"provider": ""}, {"provider": 5}]
)
def test_agent_fields_with_wrong_types_are_refused(api: Any, staff_key: str, body: dict[str, Any]) -> None:
    error = assert_error(api(staff_key).post(AGENTS, {"name": "typed", **body}), 400, "invalid")
    assert set(error["fields"]) == set(body)


def test_a_problem_inside_a_list_is_named_by_its_dotted_path(api: Any, staff_key: str) -> None:
    """The contract's `fields` map a field to a list of messages: DRF's nested {index: [...]} is flattened."""
    body = {"name": "typed", "allowed_models": ["ok", 7]}
    error = assert_error(api(staff_key).post(AGENTS, body), 400, "invalid")
    assert error["fields"] == {"allowed_models.1": ["Must be a string."]}
    assert error["message"] == "allowed_models.1: Must be a string."


def test_unknown_agent_is_not_found(api: Any, staff_key: str) -> None:
    assert_error(api(staff_key).get(f"{AGENTS}/ghost"), 404, "not_found")
    assert_error(api(staff_key).patch(f"{AGENTS}/ghost", {"model": "x"}), 404, "not_found")
    assert_error(api(staff_key).delete(f"{AGENTS}/ghost"), 404, "not_found")


def test_agents_do_not_accept_put(api: Any, staff_key: str) -> None:
    assert_error(api(staff_key).put(f"{AGENTS}/default", {"name": "default"}), 405, "method_not_allowed")


def test_invalid_json_to_agents_is_refused(api: Any, staff_key: str) -> None:
    assert_error(api(staff_key).post(AGENTS, raw="{name:"), 400, "invalid_json")


# --- providers ------------------------------------------------------------------------------------


def test_provider_api_key_is_write_only(api: Any, staff_key: str, alice_key: str) -> None:
    created = api(staff_key).post(PROVIDERS, provider_body())

    assert created.status_code == 201, created.content
    body = created.json()
    assert body["api_key_set"] is True
    assert "api_key" not in body
    assert body["models"] == ["m-small", "m-large"]
    assert body["default_model"] == "m-small"
    responses = [
        created,
        api(staff_key).get(PROVIDERS),
        api(alice_key).get(PROVIDERS),
        api(alice_key).get(f"{PROVIDERS}/local"),
        api(staff_key).patch(f"{PROVIDERS}/local", {"name": "Renamed"}),
    ]
    for response in responses:
        assert response.status_code == 200 or response.status_code == 201, response.content
        assert SECRET not in response.content.decode()
        assert '"api_key"' not in response.content.decode()
    assert Provider.objects.get(id="local").api_key == SECRET  # a patch without api_key keeps it


def test_provider_without_api_key_reports_none_set(api: Any, staff_key: str) -> None:
    body = provider_body(id="ollama")
    del body["api_key"]
    response = api(staff_key).post(PROVIDERS, body)

    assert response.status_code == 201, response.content
    assert response.json()["api_key_set"] is False


def test_provider_api_key_can_be_replaced(api: Any, staff_key: str, provider: dict[str, Any]) -> None:
    response = api(staff_key).patch(f"{PROVIDERS}/local", {"api_key": "sk-new"})

    assert response.status_code == 200
    assert "sk-new" not in response.content.decode()
    assert Provider.objects.get(id="local").api_key == "sk-new"


def test_provider_list_is_readable_by_everyone(api: Any, alice_key: str, provider: dict[str, Any]) -> None:
    body = api(alice_key).get(PROVIDERS).json()
    assert [p["id"] for p in body["results"]] == ["local"]
    assert body["next"] is None


def test_duplicate_provider_id_is_refused(api: Any, staff_key: str, provider: dict[str, Any]) -> None:
    error = assert_error(api(staff_key).post(PROVIDERS, provider_body(name="Again")), 400, "invalid")

    assert "id" in error["fields"]
    assert Provider.objects.get(id="local").name == "Local vLLM"


@pytest.mark.parametrize("provider_id", ["has space", "", "a/b", "x" * 65, 7, "active", "local\n"])
def test_bad_provider_id_is_refused(api: Any, staff_key: str, provider_id: Any) -> None:
    error = assert_error(api(staff_key).post(PROVIDERS, provider_body(id=provider_id)), 400, "invalid")
    assert "id" in error["fields"]
    assert not Provider.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"base_url": "not a url"},
        {"base_url": " http://127.0.0.1:9/v1"},
        {"base_url": 5},
        {"models": "m-small"},
        {"models": [1, 2]},
        {"name": None},
        {"api_key": 123},
    ],
)
def test_bad_provider_fields_are_refused(api: Any, staff_key: str, body: dict[str, Any]) -> None:
    error = assert_error(api(staff_key).post(PROVIDERS, provider_body(**body)), 400, "invalid")
    assert {name.split(".")[0] for name in error["fields"]} == set(body)  # `models.0`: the item in the list


def test_provider_id_cannot_change(api: Any, staff_key: str, provider: dict[str, Any]) -> None:
    assert_error(api(staff_key).patch(f"{PROVIDERS}/local", {"id": "other"}), 400, "invalid")


def test_staff_deletes_a_provider_and_agents_fall_back(
    api: Any, staff_key: str, provider: dict[str, Any]
) -> None:
    api(staff_key).post(AGENTS, {"name": "smart", "provider": "local"})

    response = api(staff_key).delete(f"{PROVIDERS}/local")

    assert response.status_code in (200, 204)
    assert_error(api(staff_key).get(f"{PROVIDERS}/local"), 404, "not_found")
    assert api(staff_key).get(f"{AGENTS}/smart").json()["provider"] is None


def test_set_active_provider(api: Any, staff_key: str, alice_key: str, provider: dict[str, Any]) -> None:
    response = api(staff_key).put(f"{PROVIDERS}/active", {"provider_id": "local", "model": "m-large"})

    assert response.status_code == 200, response.content
    assert response.json() == {"provider_id": "local", "model": "m-large"}
    assert api(alice_key).get(f"{PROVIDERS}/active").json() == {"provider_id": "local", "model": "m-large"}
    assert api(alice_key).get(PROVIDERS).json()["active"] == {"provider_id": "local", "model": "m-large"}


def test_active_provider_is_none_at_first(api: Any, alice_key: str) -> None:
    assert api(alice_key).get(f"{PROVIDERS}/active").json() == {"provider_id": None, "model": None}


def test_set_active_to_unknown_provider_is_not_found_and_harmless(
    api: Any, staff_key: str, alice_key: str
) -> None:
    response = api(staff_key).put(f"{PROVIDERS}/active", {"provider_id": "ghost", "model": "m"})

    assert_error(response, 404, "not_found")
    assert api(alice_key).get(AGENTS).status_code == 200
    assert api(alice_key).get(PROVIDERS).json()["active"] is None
    assert api(alice_key).get(f"{PROVIDERS}/active").json()["provider_id"] is None
    assert api(alice_key).post("/api/v1/chat/sessions", {}).status_code == 200
    site = SiteDefault.objects.filter(id=1).first()
    assert site is None or site.provider_id is None


@pytest.mark.parametrize("body", [{}, {"provider_id": "local"}, {"provider_id": 5, "model": "m"}])
def test_set_active_with_bad_body_is_refused(
    api: Any, staff_key: str, provider: dict[str, Any], body: dict[str, Any]
) -> None:
    error = assert_error(api(staff_key).put(f"{PROVIDERS}/active", body), 400, "invalid")
    assert error["fields"]


def test_provider_test_against_unreachable_endpoint_reports_readable_error(api: Any, staff_key: str) -> None:
    api(staff_key).post(PROVIDERS, provider_body(id="down", base_url="http://127.0.0.1:9/v1"))

    response = api(staff_key).post(f"{PROVIDERS}/down/test")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is False
    assert body["models"] == []
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert "Traceback" not in response.content.decode()
    assert SECRET not in response.content.decode()


def test_provider_test_lists_models_of_a_reachable_endpoint(
    api: Any, staff_key: str, fake_llm_process: Any
) -> None:
    api(staff_key).post(PROVIDERS, provider_body(id="fake", base_url=fake_llm_process.base_url))

    response = api(staff_key).post(f"{PROVIDERS}/fake/test")

    assert response.status_code == 200, response.content
    assert response.json() == {"ok": True, "models": ["fake-model", "fake-model-large"]}


def test_the_first_provider_becomes_the_site_default_and_a_second_does_not(
    api: Any, staff_key: str, alice_key: str
) -> None:
    assert api(staff_key).post(PROVIDERS, provider_body(id="first")).status_code == 201
    assert api(alice_key).get(f"{PROVIDERS}/active").json() == {"provider_id": "first", "model": "m-small"}

    assert api(staff_key).post(PROVIDERS, provider_body(id="second", default_model="")).status_code == 201

    assert api(alice_key).get(f"{PROVIDERS}/active").json() == {"provider_id": "first", "model": "m-small"}


def test_a_first_provider_without_a_default_model_is_the_default_with_its_first_model(
    api: Any, staff_key: str
) -> None:
    api(staff_key).post(PROVIDERS, provider_body(id="first", default_model=None, models=["a", "b"]))

    assert api(staff_key).get(f"{PROVIDERS}/active").json() == {"provider_id": "first", "model": "a"}


def test_a_refused_provider_makes_no_default(api: Any, staff_key: str) -> None:
    assert_error(api(staff_key).post(PROVIDERS, provider_body(id="bad id")), 400, "invalid")

    assert api(staff_key).get(f"{PROVIDERS}/active").json() == {"provider_id": None, "model": None}


def test_an_operators_choice_of_default_is_kept_when_the_only_provider_is_added_again(
    api: Any, staff_key: str, provider: dict[str, Any]
) -> None:
    api(staff_key).post(PROVIDERS, provider_body(id="other"))
    api(staff_key).put(f"{PROVIDERS}/active", {"provider_id": "other", "model": "m-large"})
    api(staff_key).delete(f"{PROVIDERS}/local")
    api(staff_key).post(PROVIDERS, provider_body(id="third"))

    assert api(staff_key).get(f"{PROVIDERS}/active").json() == {"provider_id": "other", "model": "m-large"}


def test_provider_test_keeps_the_models_found_on_the_provider(
    api: Any, staff_key: str, fake_llm_process: Any
) -> None:
    api(staff_key).post(PROVIDERS, provider_body(id="fake", base_url=fake_llm_process.base_url, models=[]))
    assert api(staff_key).get(f"{PROVIDERS}/fake").json()["discovered_models"] == []

    api(staff_key).post(f"{PROVIDERS}/fake/test")

    body = api(staff_key).get(f"{PROVIDERS}/fake").json()
    assert body["discovered_models"] == ["fake-model", "fake-model-large"]
    assert body["models"] == []  # found models allow nothing (docs/protocol.md §6.4)
    assert Provider.objects.get(id="fake").known_models == ["fake-model", "fake-model-large"]


def test_a_failed_provider_test_keeps_the_models_found_before(api: Any, staff_key: str) -> None:
    api(staff_key).post(PROVIDERS, provider_body(id="down", base_url="http://127.0.0.1:9/v1"))
    Provider.objects.filter(id="down").update(discovered_models=["old"])

    api(staff_key).post(f"{PROVIDERS}/down/test")

    assert api(staff_key).get(f"{PROVIDERS}/down").json()["discovered_models"] == ["old"]


def test_discovered_models_cannot_be_written(api: Any, staff_key: str, provider: dict[str, Any]) -> None:
    response = api(staff_key).patch(f"{PROVIDERS}/local", {"discovered_models": ["planted"]})

    assert response.status_code in (200, 400)
    assert Provider.objects.get(id="local").discovered_models == []


def test_the_portal_offers_the_models_a_test_found(client: Any, staff: Any, api: Any, staff_key: str) -> None:
    api(staff_key).post(PROVIDERS, provider_body(id="p1", models=["listed"]))
    Provider.objects.filter(id="p1").update(discovered_models=["found-by-test"])
    client.force_login(staff)

    for page in ("/settings/providers", "/settings/agents", "/settings/agents/default"):
        html = client.get(page).content.decode()
        assert '<option value="found-by-test">' in html, page
        assert '<option value="listed">' in html, page


def test_provider_test_of_unknown_provider_is_not_found(api: Any, staff_key: str) -> None:
    assert_error(api(staff_key).post(f"{PROVIDERS}/ghost/test"), 404, "not_found")


# --- unauthenticated endpoints and the API description ------------------------------------------------


def test_version_needs_no_authentication(client: Any, db: Any) -> None:
    response = client.get("/api/v1/version")

    assert response.status_code == 200
    body = response.json()
    assert body["api"] == "v1"
    assert isinstance(body["version"], str) and body["version"]


def test_version_ignores_a_wrong_key(client: Any, db: Any) -> None:
    response = client.get("/api/v1/version", HTTP_AUTHORIZATION="Bearer nonsense")
    assert response.status_code == 200


def test_healthz_reports_database_ok(client: Any, db: Any) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json()["checks"]["database"] == "ok"
    assert response.json()["status"] == "ok"


def test_schema_serves_openapi(api: Any, alice_key: str) -> None:
    response = api(alice_key).get("/api/v1/schema/?format=json")

    assert response.status_code == 200, response.content[:500]
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in ["/api/v1/chat/sessions", "/api/v1/agents", "/api/v1/auth/keys", "/api/v1/providers"]:
        assert path in paths, sorted(paths)


def test_docs_page_is_served(client: Any, alice: Any) -> None:
    client.force_login(alice)

    response = client.get("/api/v1/docs/")

    assert response.status_code == 200
    assert b"<html" in response.content.lower()
    # Its start-up script is a file of its own (no inline script: docs/protocol.md §6.5).
    assert b"/api/v1/docs/?script=" in response.content
    assert b"/api/v1/schema/" in client.get("/api/v1/docs/?script=").content


def test_the_api_docs_page_loads_nothing_from_a_cdn(client, alice):
    """Everything is served by the app (the portal promise covers /api/v1/docs/ too)."""
    client.force_login(alice)
    page = client.get("/api/v1/docs/").content.decode()
    assert "cdn.jsdelivr" not in page and "unpkg.com" not in page
    assert "/static/drf_spectacular_sidecar/" in page
