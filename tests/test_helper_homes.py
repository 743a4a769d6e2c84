"""Helpers live with their concern: what a URL carries is read in agentsite/query.py (not among serializer
fields or the API keys' model), and the scheduler's command belongs to cron (`manage.py runscheduler` works
as before)."""

from __future__ import annotations

from django.core.management import get_commands

import accounts.models
import agentsite.fields
from agentsite import query


def test_url_values_are_read_in_one_module() -> None:
    assert {query.integer_pk.__module__, query.query_int.__module__, query.query_flag.__module__} == {
        "agentsite.query"
    }
    for old_home in (agentsite.fields, accounts.models):
        assert not {"integer_pk", "query_int", "query_flag"} & set(vars(old_home)), old_home.__name__


def test_runscheduler_is_crons_command() -> None:
    assert get_commands()["runscheduler"] == "cron"
