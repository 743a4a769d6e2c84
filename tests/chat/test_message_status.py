"""`Message.status` is one of the statuses the code writes (chat/statuses.py), held by a database constraint
that the migration adds without changing the rows there are."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from django.db import IntegrityError, transaction

from chat.models import Message
from chat.statuses import MessageStatus
from tests import factories
from tests.test_secrets_migration import migrate
from tests.test_settings import base_environ, manage

WRITTEN = ["pending", "running", "steered", "removed", "closed", "completed", "cancelled", "error"]
WRITTEN += ["interrupted", "streaming"]


def test_the_statuses_are_those_the_queue_the_recorder_and_cron_write() -> None:
    assert sorted(MessageStatus.values) == sorted(WRITTEN)
    assert Message.Status is MessageStatus
    assert Message._meta.get_field("status").default == MessageStatus.COMPLETED


@pytest.mark.django_db
@pytest.mark.services_rerun
@pytest.mark.parametrize("status", ["done", "", "Pending", "queued"])
def test_the_database_refuses_a_status_no_code_writes(alice: Any, status: str) -> None:
    session = factories.session(alice)
    with pytest.raises(IntegrityError), transaction.atomic():
        Message.objects.create(session=session, message_id="m", role="user", content="hi", status=status)


MAKE_ROWS = f"""
from django.contrib.auth import get_user_model
from chat.models import Message, Session
user = get_user_model().objects.create_user(username="alice")
session = Session.objects.create(id="s", user=user)
for index, status in enumerate({WRITTEN!r}):
    Message.objects.create(
        session=session, message_id=f"m{{index}}", role="user", content=status, status=status
    )
"""


def test_the_migration_keeps_every_stored_status_and_then_refuses_others(tmp_path: Path) -> None:
    environ = base_environ(tmp_path)
    database = tmp_path / "agentsite.sqlite3"
    migrate(environ, "", "chat 0008")  # everything, then chat back to before the constraint
    made = manage(environ, "shell", "-c", MAKE_ROWS)
    assert made.returncode == 0, made.stderr
    migrate(environ)
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT message_id, content, status FROM chat_message ORDER BY id").fetchall()
        assert rows == [(f"m{index}", status, status) for index, status in enumerate(WRITTEN)]
        with pytest.raises(sqlite3.IntegrityError, match="chat_message_status_known"):
            db.execute("UPDATE chat_message SET status = 'done' WHERE message_id = 'm0'")
