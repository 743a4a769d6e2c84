"""The OpenAPI document (issue 14, docs/protocol.md §2): it builds without one drf-spectacular warning or
error and validates; every operation says what it takes and answers, with the error shape; and every
list the document calls paginated honours `limit` and `cursor`. (tests/e2e/test_api_fuzz.py holds the live
server to it.)"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.management import call_command
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator

from tests import factories
from tests.test_rest_keys import assert_error

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")


def build() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


@pytest.fixture(scope="module")
def document(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        return build()


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
        if method in METHODS
    ]


def test_the_document_builds_without_a_warning_and_validates(tmp_path: Any, capsys: Any) -> None:
    GENERATOR_STATS.reset()
    try:
        call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    except Exception as exc:  # SchemaGenerationError or the validator's: the warnings are on stderr
        pytest.fail(f"{exc!r}\n{capsys.readouterr().err}")


def test_the_document_is_the_same_every_time_it_is_built() -> None:
    """drf-spectacular once kept a mark on the pydantic model of a PATCH body, so the second document named
    the job's POST body "Patched…" and required nothing in PATCH (agentsite/openapi.py)."""
    first, second = build(), build()
    assert second == first
    patch = first["paths"]["/api/v1/cron/jobs/{job_id}"]["patch"]["requestBody"]
    assert patch["content"]["application/json"]["schema"]["$ref"].endswith("/PatchedJobSpecRequest")
    assert "required" not in first["components"]["schemas"]["PatchedJobSpecRequest"]
    assert first["components"]["schemas"]["JobSpecRequest"]["required"] == ["name", "schedule", "dispatch"]


def test_every_operation_says_what_it_answers_and_its_errors(document: dict[str, Any]) -> None:
    seen_ids: set[str] = set()
    for path, method, operation in operations(document):
        where = f"{method.upper()} {path}"
        assert operation["operationId"] not in seen_ids, where
        seen_ids.add(operation["operationId"])
        responses = operation["responses"]
        successes = [status for status in responses if status.startswith("2")]
        assert successes, where
        for status in successes:
            assert status == "204" or responses[status].get("content"), f"{where} {status} has no body"
        errors = {status: answer for status, answer in responses.items() if status[0] in "45"}
        assert "429" in errors, where
        for status, answer in errors.items():
            schema = answer["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/Error"}, f"{where} {status}"
        if operation.get("security") != [{}]:
            assert {"401", "503"} <= set(errors), where
        if "{" in path:
            assert "404" in errors, f"{where} names an object and may not find it"
        if "requestBody" in operation and "application/json" in operation["requestBody"]["content"]:
            assert {"400", "413", "415"} <= set(errors), where


def test_the_status_codes_are_the_ones_the_server_answers(document: dict[str, Any]) -> None:
    def successes(path: str, method: str) -> set[str]:
        return {status for status in document["paths"][path][method]["responses"] if status.startswith("2")}

    assert successes("/api/v1/auth/keys", "post") == {"201"}
    assert successes("/api/v1/chat/sessions/{session_id}/messages", "post") == {"202"}
    assert successes("/api/v1/cron/jobs/{job_id}/run", "post") == {"202"}
    assert successes("/api/v1/chat/sessions/{session_id}/files/{path}", "put") == {"200", "201"}
    for deleted_with_a_body in (
        "/api/v1/chat/sessions/{session_id}",
        "/api/v1/auth/keys/{key_id}",
        "/api/v1/cron/jobs/{job_id}",
        "/api/v1/inbox/{item_id}",
    ):
        assert successes(deleted_with_a_body, "delete") == {"200"}, deleted_with_a_body
    for deleted_empty in ("/api/v1/agents/{name}", "/api/v1/agents/{name}/config/acp/{runner}"):
        assert successes(deleted_empty, "delete") == {"204"}, deleted_empty


def test_the_streams_are_described(document: dict[str, Any]) -> None:
    assert "/api/v1/chat/ws/{session_id}" in document["info"]["description"]
    events = document["paths"]["/api/v1/chat/sessions/{session_id}/events"]["get"]
    stream = events["responses"]["200"]["content"]["text/event-stream"]["schema"]
    assert stream["properties"]["data"]["contentMediaType"] == "application/json"
    assert "connected" in stream["properties"]["event"]["enum"]


def test_pydantic_bodies_are_described_by_their_models(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    message = schemas["MessageInputRequest"]
    assert message["required"] == ["content"]
    assert {"content", "message_id", "steer", "config", "approval_mode", "model"} <= set(
        message["properties"]
    )
    job = schemas["JobSpecRequest"]
    assert {"$ref": "#/components/schemas/ScheduleSpec"} == job["properties"]["schedule"]
    assert "id" in job["properties"]  # a JOB read with GET may be sent back


# -- every paginated list honours limit and cursor -------------------------------------------------


def paginated_lists(document: dict[str, Any]) -> dict[str, int]:
    """Each list's path and its largest `limit`."""
    lists = {}
    for path, method, operation in operations(document):
        parameters = {parameter["name"]: parameter for parameter in operation.get("parameters", [])}
        if method == "get" and {"limit", "cursor"} <= set(parameters):
            lists[path] = parameters["limit"]["schema"]["maximum"]
    return lists


@pytest.fixture
def owned(alice: Any) -> dict[str, str]:
    """An object of alice's for every path parameter a list names, with two items in each list."""
    from django.utils import timezone

    from chat.models import Message
    from cron.models import CronRun
    from cron.services import job_create

    session = factories.session(alice, session_id="s1")
    factories.session(alice, session_id="s2")
    for index in range(2):
        Message.objects.create(
            session=session, message_id=f"m{index}", role="user", content="hi", entered_at=timezone.now()
        )
    body = {
        "name": "job",
        "task_type": "text",
        "text": "a note",
        "schedule": {"type": "interval", "every_seconds": 3600},
        "dispatch": {"target": {"session_id": "s1"}},
    }
    job = job_create(owner=alice, data=body)
    job_create(owner=alice, data={**body, "name": "job 2"})
    for _ in range(2):
        CronRun.objects.create(job=job, trigger="manual", status="success", finished_at=timezone.now())
    for index in range(2):
        alice.inbox_items.create(source_type="cron", title=f"item {index}")
    factories.api_key(alice, name="second")
    return {"session_id": "s1", "job_id": job.id}


def test_the_document_knows_the_lists(document: dict[str, Any]) -> None:
    lists = set(paginated_lists(document))
    assert {
        "/api/v1/chat/sessions/{session_id}/files",
        "/api/v1/chat/sessions",
        "/api/v1/chat/sessions/{session_id}/messages",
        "/api/v1/cron/jobs",
        "/api/v1/cron/jobs/{job_id}/history",
        "/api/v1/inbox",
        "/api/v1/auth/keys",
        "/api/v1/agents",
        "/api/v1/providers",
        "/api/v1/audit",
    } <= lists


def test_every_paginated_list_honours_limit_and_cursor(
    document: dict[str, Any],
    api: Any,
    alice: Any,
    alice_key: str,
    staff: Any,
    staff_key: str,
    owned: dict[str, str],
) -> None:
    from agents.models import Agent, Provider

    Agent.objects.create(name="second")
    for index in range(2):
        Provider.objects.create(id=f"p{index}", name=f"P{index}", base_url="http://127.0.0.1:9/v1")
    for name in ("a.txt", "b.txt"):
        # 200: a workspace of an earlier test's session "s1" (the data dir outlives the database)
        assert api(alice_key).put(f"/api/v1/chat/sessions/s1/files/{name}", "x").status_code in {200, 201}
    for template, maximum in paginated_lists(document).items():
        url = re.sub(r"\{(\w+)\}", lambda match: owned[match.group(1)], template)
        where = f"GET {url}"
        key = staff_key if template == "/api/v1/audit" else alice_key  # the audit trail is staff's
        for bad in ("abc", "0", str(maximum + 1), "1.5", ""):
            error = assert_error(api(key).get(f"{url}?limit={bad}"), 400, "invalid")
            assert "limit" in error["message"], where
        assert "cursor" in assert_error(api(key).get(f"{url}?cursor=nonsense"), 400, "invalid")["message"]
        first = api(key).get(f"{url}?limit=1")
        assert first.status_code == 200, (where, first.content)
        page = first.json()
        assert len(page["results"]) == 1 and page["next"], where
        second = api(key).get(f"{url}?limit=1&cursor={page['next']}").json()
        assert second["results"] and second["results"] != page["results"], where


def test_options_answers_on_every_path(
    document: dict[str, Any], api: Any, alice: Any, alice_key: str
) -> None:
    """OPTIONS described the body serializer of POST and PUT and failed (500) on views whose bodies another
    model validates (found by schemathesis: sessions, jobs, keys, messages)."""
    for path in document["paths"]:
        url = re.sub(r"\{\w+\}", "x", path)
        response = api(alice_key).client.options(url, **api(alice_key).headers)
        allowed = {200, 403} if path == "/api/v1/audit" else {200, 404}  # the audit trail is staff's
        assert response.status_code in allowed, (path, response.status_code, response.content[:300])


@pytest.mark.parametrize(
    "raw",
    ["true", "TRUE", "Yes", "1", "false", "No", "0", "", " true", "\x1etrue", "\x1e", "tru", "yes ", "9"],
)
def test_a_flags_schema_admits_exactly_what_the_server_takes(raw: str) -> None:
    """The fuzzer found `?hide=%1E` taken as false (stripped as whitespace) where the schema refused it."""
    from agentsite.openapi import flag_parameter
    from agentsite.query import query_flag
    from agentsite.validation import InvalidInput

    admitted = re.fullmatch(flag_parameter("hide", "h").type["pattern"], raw) is not None
    try:
        query_flag(raw, "hide")
        taken = True
    except InvalidInput:
        taken = False
    assert admitted == taken, raw
