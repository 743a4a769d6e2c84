"""Provider URLs and `POST /providers/{id}/test` (docs/protocol.md §6.3 and its extensions).

A `base_url` that points at a link-local or metadata address is refused when it is saved (REST, admin,
the environment) and when the model client connects; `AGENTSITE_PROVIDER_DENY_PRIVATE` adds loopback and
private ranges. The test endpoint tells the status and the model ids, nothing of any other body, and the
same sentence for a closed port and an open one that is no model server. The servers are real, on
loopback; only DNS is replaced (a resolver function), where a name must resolve to a chosen address.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agents.admin import ProviderForm
from agents.llm import ModelError, OpenAIModelClient
from agents.models import Provider, SiteDefault
from agents.services import provider_register_from_env
from tests.support.http_stub import closed_port, http_stub, not_http_port
from tests.test_rest_keys import assert_error

PROVIDERS = "/api/v1/providers"
METADATA = "http://169.254.169.254/latest/meta-data/"
BODY_MARKER = "internal-admin-console-7731"


def body(**overrides: Any) -> dict[str, Any]:
    return {"id": "p", "name": "P", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-x", **overrides}


# --- when it is saved ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [METADATA, "http://[fd00:ec2::254]/v1", "https://169.254.170.2/v2"])
def test_rest_refuses_a_metadata_base_url_naming_base_url(api: Any, staff_key: str, url: str) -> None:
    error = assert_error(api(staff_key).post(PROVIDERS, body(base_url=url)), 400, "invalid")

    assert set(error["fields"]) == {"base_url"}
    assert error["message"].startswith("base_url: ")
    assert "link-local or cloud metadata" in error["message"]
    assert not Provider.objects.exists()


def test_rest_refuses_other_schemes_and_a_patch_to_metadata(api: Any, staff_key: str) -> None:
    assert_error(api(staff_key).post(PROVIDERS, body(base_url="ftp://example.com/v1")), 400, "invalid")
    assert api(staff_key).post(PROVIDERS, body()).status_code == 201

    error = assert_error(api(staff_key).patch(f"{PROVIDERS}/p", {"base_url": METADATA}), 400, "invalid")
    assert "base_url" in error["fields"]
    assert Provider.objects.get(id="p").base_url == "http://127.0.0.1:9/v1"


def test_deny_private_refuses_loopback_and_private_addresses(api: Any, staff_key: str, settings: Any) -> None:
    settings.AGENTSITE_PROVIDER_DENY_PRIVATE = True
    for url in ["http://127.0.0.1:8000/v1", "http://localhost:11434/v1", "http://10.0.0.2/v1"]:
        error = assert_error(api(staff_key).post(PROVIDERS, body(base_url=url)), 400, "invalid")
        assert "AGENTSITE_PROVIDER_DENY_PRIVATE" in error["fields"]["base_url"][0]
    assert api(staff_key).post(PROVIDERS, body(base_url="https://api.openai.com/v1")).status_code == 201


def test_the_admin_form_refuses_a_metadata_base_url(db: Any) -> None:
    form = ProviderForm(data={**body(base_url=METADATA), "model_list": "[]", "default_model": ""})

    assert not form.is_valid()
    assert "link-local or cloud metadata" in form.errors["base_url"][0]


def test_the_provider_from_the_environment_is_stored_encrypted(settings: Any, db: Any) -> None:
    from django.db import connection

    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    settings.OPENAI_API_KEY = "sk-from-environment-canary"

    provider = provider_register_from_env()

    assert provider is not None and Provider.objects.get(id="env").api_key == "sk-from-environment-canary"
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM agents_provider WHERE id = 'env'")
        assert "canary" not in cursor.fetchone()[0]
    assert SiteDefault.load().provider_id == "env"


def test_a_refused_base_url_from_the_environment_is_logged_and_skipped(
    settings: Any, db: Any, caplog: Any
) -> None:
    settings.OPENAI_BASE_URL = METADATA
    settings.OPENAI_API_KEY = "sk-x"

    with caplog.at_level(logging.WARNING):
        assert provider_register_from_env() is None

    assert not Provider.objects.exists()
    assert "OPENAI_BASE_URL may not point at 169.254.169.254" in caplog.text


# --- when it is called --------------------------------------------------------------------------------


def client_for(url: str, answers: dict[str, list[str]]) -> OpenAIModelClient:
    async def resolve(host: str, port: int) -> list[str]:
        return answers[host]

    return OpenAIModelClient(base_url=url, api_key="k", provider_name="p", max_retries=0, resolver=resolve)


async def test_the_model_client_refuses_a_name_that_resolves_to_a_metadata_address(db: Any) -> None:
    models = json.dumps({"data": [{"id": "m"}]}).encode()
    with http_stub(body=models, content_type="application/json") as stub:
        ok = client_for(f"http://models.test:{stub.port}/v1", {"models.test": ["127.0.0.1"]})
        evil = client_for(f"http://evil.test:{stub.port}/v1", {"evil.test": ["169.254.169.254"]})
        try:
            assert await ok.list_models() == ["m"]
            with pytest.raises(ModelError) as listed:
                await evil.list_models()
            with pytest.raises(ModelError) as streamed:
                async for _ in evil.stream_chat(model="m", messages=[{"role": "user", "content": "hi"}]):
                    pass
        finally:
            await ok.aclose()
            await evil.aclose()

    assert listed.value.code == streamed.value.code == "address_refused"
    assert "evil.test (169.254.169.254)" in streamed.value.message
    assert len(stub.requests) == 1


def test_a_url_saved_before_deny_private_is_refused_when_called(
    api: Any, staff_key: str, settings: Any
) -> None:
    with http_stub(body=b'{"data": []}', content_type="application/json") as stub:
        assert api(staff_key).post(PROVIDERS, body(base_url=stub.base_url)).status_code == 201
        settings.AGENTSITE_PROVIDER_DENY_PRIVATE = True

        answer = api(staff_key).post(f"{PROVIDERS}/p/test").json()

    assert answer["ok"] is False and answer["error"]["code"] == "address_refused"
    assert stub.requests == []


# --- what the test endpoint tells ----------------------------------------------------------------------


def run_test(api: Any, staff_key: str, base_url: str) -> dict[str, Any]:
    if Provider.objects.filter(id="p").exists():
        assert api(staff_key).patch(f"{PROVIDERS}/p", {"base_url": base_url}).status_code == 200
    else:
        assert api(staff_key).post(PROVIDERS, body(base_url=base_url)).status_code == 201
    response = api(staff_key).post(f"{PROVIDERS}/p/test")
    assert response.status_code == 200
    return dict(response.json())


@pytest.mark.parametrize(
    ("status", "content_type", "text"),
    [
        (200, "text/html", f"<html><title>{BODY_MARKER}</title></html>"),
        (200, "application/json", json.dumps({"secret": BODY_MARKER})),
        (200, "application/json", json.dumps({"data": [{"name": BODY_MARKER}]})),
        (404, "text/plain", f"no such page on {BODY_MARKER}"),
        (500, "application/json", json.dumps({"error": {"message": BODY_MARKER}})),
        (302, "text/html", BODY_MARKER),
    ],
)
def test_a_body_that_is_not_a_model_list_never_appears_in_the_answer(
    api: Any, staff_key: str, status: int, content_type: str, text: str
) -> None:
    with http_stub(status=status, body=text.encode(), content_type=content_type) as stub:
        answer = run_test(api, staff_key, stub.base_url)

    assert BODY_MARKER not in json.dumps(answer)
    assert answer["ok"] is False and answer["models"] == []
    assert answer["error"] == {
        "code": "not_a_model_list",
        "message": f"Provider 'P' answered, but not with an OpenAI-compatible model list (HTTP {status}).",
    }


def test_a_refused_key_says_so_without_the_body(api: Any, staff_key: str) -> None:
    payload = json.dumps({"error": {"message": BODY_MARKER}}).encode()
    with http_stub(status=401, body=payload, content_type="application/json") as stub:
        answer = run_test(api, staff_key, stub.base_url)

    assert answer["error"]["code"] == "auth_failed" and BODY_MARKER not in json.dumps(answer)


def test_a_closed_port_and_an_open_port_that_is_no_model_server_answer_the_same(
    api: Any, staff_key: str
) -> None:
    closed = run_test(api, staff_key, f"http://127.0.0.1:{closed_port()}/v1")
    with not_http_port() as port:
        other_service = run_test(api, staff_key, f"http://127.0.0.1:{port}/v1")

    sentence = "Could not reach provider 'P' at its base URL for the model list."
    assert closed == other_service
    assert closed == {"ok": False, "error": {"code": "unreachable", "message": sentence}, "models": []}


def test_a_model_list_answers_its_ids(api: Any, staff_key: str) -> None:
    models = {"object": "list", "data": [{"id": "b-model", "object": "model"}, {"id": "a-model"}]}
    with http_stub(body=json.dumps(models).encode(), content_type="application/json") as stub:
        answer = run_test(api, staff_key, stub.base_url)

    assert answer == {"ok": True, "models": ["a-model", "b-model"]}
    assert stub.requests[0][0] == "/v1/models"
    assert stub.requests[0][1]["authorization"] == "Bearer sk-x"
