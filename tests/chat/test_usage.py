"""Usage accounting, the daily budget and limits (docs/protocol.md §6.4): chat/usage.py, GET /api/v1/usage,
the portal's usage page, the turn's refusal, the allowed models. Real turns on real servers:
tests/e2e/test_fair_share.py."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from agents.contract import ChatRequest, InputError
from agents.models import Agent, Provider
from chat import usage as usage_module
from chat.models import Usage
from chat.runtime import DjangoRuntime, RefusedTurn, model_refusal, setup_cache
from chat.usage import budget_refusal, daily_totals, tokens_today, usage_add, usage_report
from tests import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]

USAGE = "/api/v1/usage"


def step(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def test_each_model_call_adds_to_its_users_day_and_model(alice: Any, bob: Any) -> None:
    usage_add(user_id=alice.pk, model="m1", usage=step(10, 5))
    usage_add(user_id=alice.pk, model="m1", usage=step(1, 1))
    usage_add(user_id=alice.pk, model="m2", usage={"prompt_tokens": 7, "completion_tokens": 3})  # no total
    usage_add(user_id=alice.pk, model="m2", usage=None)  # a provider that reports nothing: one call, 0 tokens
    usage_add(user_id=bob.pk, model="m1", usage=step(100, 100))
    rows = {row.model: row for row in Usage.objects.filter(user=alice)}
    assert (rows["m1"].prompt_tokens, rows["m1"].completion_tokens, rows["m1"].total_tokens) == (11, 6, 17)
    assert rows["m1"].requests == 2 and rows["m2"].total_tokens == 10 and rows["m2"].requests == 2
    assert tokens_today(alice.pk) == 27 and tokens_today(bob.pk) == 200


def test_garbage_in_a_providers_usage_counts_nothing(alice: Any) -> None:
    usage_add(
        user_id=alice.pk,
        model="m",
        usage={"prompt_tokens": -5, "completion_tokens": "9", "total_tokens": 1.5},
    )
    assert tokens_today(alice.pk) == 0 and Usage.objects.get(user=alice).requests == 1


def test_two_processes_creating_the_days_row_at_once_both_count(alice: Any, monkeypatch) -> None:
    """Our update found no row; the other process created it before our insert: its unique constraint
    refuses ours, and the tokens are added to its row."""
    real_add = usage_module._add  # the day's UPDATE (SQL)
    calls: list[int] = []

    def add(*args: Any) -> bool:
        calls.append(1)
        if len(calls) == 1:
            Usage.objects.create(user=alice, day=usage_module.today(), model="m", total_tokens=5, requests=1)
            return False  # as seen just before the other process's insert
        return real_add(*args)

    monkeypatch.setattr(usage_module, "_add", add)
    usage_add(user_id=alice.pk, model="m", usage=step(3, 0))
    row = Usage.objects.get(user=alice)
    assert row.total_tokens == 8 and row.requests == 2 and len(calls) == 2


def test_the_budget_refuses_once_todays_tokens_reach_it(alice: Any) -> None:
    assert budget_refusal(alice.pk) is None  # unlimited by default
    with override_settings(AGENTSITE_USER_DAILY_TOKENS=100):
        usage_add(user_id=alice.pk, model="m", usage=step(60, 39))
        assert budget_refusal(alice.pk) is None
        usage_add(user_id=alice.pk, model="m", usage=step(1, 0))
        refusal = budget_refusal(alice.pk)
        assert refusal is not None and refusal["code"] == "budget_exceeded"
        assert "100" in refusal["message"] and "midnight UTC" in refusal["message"]
        Usage.objects.filter(user=alice).update(day=dt.date(2020, 1, 1))  # yesterday's tokens do not count
        assert budget_refusal(alice.pk) is None


def test_a_report_lists_days_and_models_and_every_day_of_the_chart(alice: Any, monkeypatch) -> None:
    usage_add(user_id=alice.pk, model="m", usage=step(2, 2))
    Usage.objects.create(
        user=alice, day=usage_module.today() - dt.timedelta(days=2), model="old", total_tokens=9
    )
    Usage.objects.create(
        user=alice, day=usage_module.today() - dt.timedelta(days=40), model="older", total_tokens=1
    )
    report = usage_report(user_id=alice.pk, days=7)
    assert [(row["model"], row["total_tokens"]) for row in report["results"]] == [("m", 4), ("old", 9)]
    assert report["total_tokens"] == 13 and report["today_tokens"] == 4 and report["daily_budget"] is None
    days = daily_totals(report)
    assert len(days) == 7 and days[-1] == (usage_module.today(), 4) and days[-3][1] == 9 and days[0][1] == 0


def test_the_usage_api_reports_the_callers_own_and_staff_may_ask_for_anyone(
    api: Any, alice: Any, alice_key: str, bob: Any, staff_key: str
) -> None:
    usage_add(user_id=alice.pk, model="m", usage=step(3, 4))
    own = api(alice_key).get(USAGE)
    assert own.status_code == 200
    body = own.json()
    assert body["user"] == {"id": alice.pk, "username": "alice"} and body["days"] == 30
    assert body["results"][0]["total_tokens"] == 7
    assert api(staff_key).get(f"{USAGE}?user=alice&days=1").json()["today_tokens"] == 7
    assert api(staff_key).get(f"{USAGE}?user={alice.pk}").json()["user"]["username"] == "alice"
    for query, status, code in (
        ("?user=bob", 403, "forbidden"),  # alice may not look at bob
        ("?days=0", 400, "invalid"),
        ("?days=367", 400, "invalid"),
        ("?days=abc", 400, "invalid"),
        ("?days=", 400, "invalid"),  # found by the API fuzzer: an empty value was taken as the default
        ("?days=%207", 400, "invalid"),  # int() takes " 7", "+7", "1_0" and "٧"; the schema's integer not
        ("?days=%2B7", 400, "invalid"),
        ("?days=1_0", 400, "invalid"),
        ("?days=%D9%A7", 400, "invalid"),
    ):
        response = api(alice_key).get(USAGE + query)
        assert response.status_code == status and response.json()["error"]["code"] == code
    assert api(staff_key).get(f"{USAGE}?user=nobody").status_code == 404
    for unusual in ("²", str(2**64)):  # once a 500: "²".isdigit(), and an id no column holds
        assert api(staff_key).get(f"{USAGE}?user={unusual}").status_code == 404
    assert api(None).get(USAGE).status_code == 401


def test_the_usage_page_draws_thirty_days_and_staff_pick_a_user(client: Any, alice: Any, staff: Any) -> None:
    usage_add(user_id=alice.pk, model="model-a", usage=step(30, 12))
    client.force_login(alice)
    page = client.get("/usage").content.decode()
    assert page.count('<rect class="bar') == 30 and "model-a" in page and "42" in page
    assert 'id="usage-user"' not in page  # only staff pick a user
    assert "Usage of" not in client.get(f"/usage?user={staff.pk}").content.decode()  # not staff: ignored
    client.force_login(staff)
    staff_page = client.get(f"/usage?user={alice.pk}").content.decode()
    assert "Usage of alice" in staff_page and 'id="usage-user"' in staff_page and "model-a" in staff_page
    assert client.get("/usage?user=999999").status_code == 404
    assert client.get("/usage?user=²").status_code == 404


def test_the_models_a_message_may_ask_for(alice: Any) -> None:
    provider = Provider.objects.create(
        id="p",
        name="P",
        base_url="http://127.0.0.1:9/v1",
        model_list=["small", "large"],
        default_model="small",
    )
    agent = Agent.objects.create(name="helper", provider=provider)
    session = factories.session(alice, agent_name="helper")
    assert model_refusal(session.id, None) is None
    assert model_refusal(session.id, "large") is None  # the provider's list, when staff listed none
    refusal = model_refusal(session.id, "huge")
    assert (
        refusal is not None
        and refusal["code"] == "model_not_allowed"
        and "large, small" in refusal["message"]
    )
    agent.allowed_models = ["tiny"]
    agent.save()
    setup_cache.clear()
    assert model_refusal(session.id, "large") is not None and model_refusal(session.id, "tiny") is None
    assert model_refusal(session.id, "small") is None  # its own model, always
    agent.allowed_models = ["*"]
    agent.save()
    setup_cache.clear()
    assert model_refusal(session.id, "anything") is None


async def test_a_message_accepted_with_a_model_staff_then_disallow_is_refused_by_its_turn(alice: Any) -> None:
    """Why the model is checked twice (chat/services.py, chat/runtime.py turn_setup): the configuration can
    change while a message waits, and its turn must not run a model that is no longer allowed."""
    from chat.services import message_submit

    def configure() -> tuple[Agent, str]:
        provider = Provider.objects.create(
            id="p",
            name="P",
            base_url="http://127.0.0.1:9/v1",
            model_list=["small", "large"],
            default_model="small",
        )
        agent = Agent.objects.create(name="helper", provider=provider)
        return agent, factories.session(alice, agent_name="helper").id

    agent, session_id = await sync_to_async(configure)()
    setup_cache.reset()
    with pytest.raises(InputError) as refused:  # refused where it is accepted, before anything is stored
        await message_submit(session_id=session_id, content="hi", message_id="m0", model="huge")
    assert refused.value.code == "model_not_allowed" and refused.value.status == 400
    assert model_refusal(session_id, "large") is None  # accepted now
    agent.allowed_models = ["tiny"]
    await sync_to_async(agent.save)()
    setup_cache.clear()
    turn = await DjangoRuntime().stream(
        ChatRequest(message_id="m1", content="hi", model="large"), session_id=session_id
    )
    assert isinstance(turn, RefusedTurn)
    result = await turn.result()
    assert result.error is not None and result.error["code"] == "model_not_allowed"


async def test_a_turn_past_the_budget_is_refused_without_calling_the_model(alice: Any) -> None:
    session = await sync_to_async(factories.session)(alice)
    await sync_to_async(usage_add)(user_id=alice.pk, model="m", usage=step(50, 50))
    with override_settings(AGENTSITE_USER_DAILY_TOKENS=100):
        turn = await DjangoRuntime().stream(ChatRequest(message_id="m1", content="hi"), session_id=session.id)
    assert isinstance(turn, RefusedTurn)
    assert [event async for event in turn] == []
    result = await turn.result()
    assert result.status == "error" and result.error is not None and result.error["code"] == "budget_exceeded"


async def test_parallel_turns_stop_at_the_budget_after_the_model_call_in_flight(fake_llm) -> None:
    """Issue 24, finding 7: the budget was checked only when a turn started (budget 200, four parallel
    turns used 60,000). Now each model call after a turn's first asks again: four turns that each would
    call the model (with a tool) twenty times stop after the call that crossed it."""
    from agentsite.dev.fake_llm import Reply, ScriptedToolCall
    from chat.live import live_sessions
    from tests.support.chat_queue import a_use_fake_llm, a_user_with_key, frames_until, is_result
    from tests.support.ws import connect, send

    user, key = await a_user_with_key("alice")
    await a_use_fake_llm(fake_llm.base_url)
    fake_llm.default = Reply(  # a tool call every time: the turn would go on for max_steps calls
        text="looking",
        tool_calls=[ScriptedToolCall(name="list_files", arguments={})],
        usage=step(60, 40),
        delay=0.2,
    )
    sessions = [(await sync_to_async(factories.session)(user)).id for _ in range(4)]
    with override_settings(AGENTSITE_USER_DAILY_TOKENS=200, AGENTSITE_USER_MAX_CONCURRENT_TURNS=4):
        sockets = [(await connect(session_id, key=key))[0] for session_id in sessions]
        for n, ws in enumerate(sockets):
            await send(ws, {"type": "message", "message_id": f"m{n}", "content": "list my files, again"})
        results = [
            (await frames_until(ws, is_result(f"m{n}"), within=20))[-1] for n, ws in enumerate(sockets)
        ]
        for ws in sockets:
            # the queue paused on the error: "send now" starts the next one, refused before any model call
            await send(ws, {"type": "message", "message_id": "later", "content": "and now?", "steer": True})
        later = [(await frames_until(ws, is_result("later"), within=20))[-1] for ws in sockets]
    for result in [*results, *later]:
        assert result["data"]["status"] == "error", result
        assert result["data"]["error"]["code"] == "budget_exceeded", result
    used = await sync_to_async(tokens_today)(user.pk)
    calls = len(fake_llm.chat_requests)
    assert used == 100 * calls
    assert 200 <= used <= 200 + 4 * 100, f"{calls} model calls: the budget plus one call per turn in flight"
    for session_id in sessions:  # the queue pauses as for any error
        assert (await live_sessions().snapshot(session_id))[0]["paused"] is True
    for ws in sockets:
        await ws.disconnect()
