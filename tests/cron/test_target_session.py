"""A job's target session comes from chat's one get-or-create of the open session (chat/services.py
`session_get_or_create_open`, also a socket's `?create=1`): a session its owner makes at the same moment
is joined, where cron's own copy failed the run (`could not create session`)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections, transaction

from chat.models import Session
from cron import services

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]

TARGET = "console:race"


def text_job(owner: Any) -> Any:
    return services.job_create(
        owner=owner,
        data={
            "name": "race",
            "schedule": {"type": "interval", "every_seconds": 3600},
            "task_type": "text",
            "text": "hello",
            "dispatch": {"target": {"session_id": TARGET}},
        },
    )


def test_a_target_session_the_owner_makes_at_the_same_moment_is_joined(alice: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs Postgres: SQLite serialises every writer, so there is no race to lose")
    job = text_job(alice)
    made, release = threading.Event(), threading.Event()

    def the_owners_socket() -> None:  # another process creating the id, its transaction still open
        try:
            with transaction.atomic():
                Session.objects.create(id=TARGET, user=alice, agent_name="default", title="mine")
                made.set()
                release.wait(10)
        finally:
            connections.close_all()

    other = threading.Thread(target=the_owners_socket)
    other.start()
    assert made.wait(10)
    threading.Timer(0.5, release.set).start()  # the run's INSERT waits on the unique key until then
    try:
        session = services.run_target_session(job=job)
    finally:
        release.set()
        other.join(10)
    assert (session.id, session.user_id, session.title) == (TARGET, alice.pk, "mine")
    assert Session.objects.filter(id=TARGET).count() == 1


def test_a_missing_target_session_is_created_for_the_owner_with_the_job_as_title(alice: Any) -> None:
    session = services.run_target_session(job=text_job(alice))
    assert (session.id, session.user_id, session.title, session.is_open) == (TARGET, alice.pk, "race", True)
