"""What the cron and inbox endpoints answer, for the OpenAPI document (the views answer `to_dict()`).

Request bodies of jobs are the pydantic models of cron/specs.py, which also validate them."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentsite.fields import StrictCharField
from cron.models import CronRun, InboxItem
from cron.specs import JobSpec

RUN_STATUSES = [choice.value for choice in CronRun.Status]


class Job(JobSpec):
    """JOB as the API answers it: its writable part (JobSpec) and what the server keeps."""

    id: str
    next_run_at: dt.datetime | None
    last_run_at: dt.datetime | None
    last_status: Literal["running", "success", "failure", "error", "cancelled"] | None
    created_at: dt.datetime
    updated_at: dt.datetime


class RunSerializer(serializers.Serializer):
    """RUN (docs/protocol.md §2)."""

    run_id = serializers.CharField()
    job_id = serializers.CharField()
    trigger = serializers.ChoiceField(choices=[choice.value for choice in CronRun.Trigger])
    status = serializers.ChoiceField(choices=RUN_STATUSES)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    response = serializers.CharField(allow_null=True, allow_blank=True)
    error = serializers.CharField(allow_null=True, allow_blank=True)
    session_id = serializers.CharField(allow_null=True)
    message_id = serializers.CharField(allow_null=True)


class RunStartedSerializer(serializers.Serializer):
    run_id = serializers.CharField()


class DeletedSerializer(serializers.Serializer):
    id = serializers.CharField()
    deleted = serializers.BooleanField()


class InboxItemSerializer(serializers.Serializer):
    id = serializers.CharField()
    source_type = serializers.ChoiceField(choices=[choice.value for choice in InboxItem.SourceType])
    source_id = serializers.CharField(allow_blank=True)
    title = serializers.CharField()
    body = serializers.CharField(allow_blank=True)
    status = serializers.CharField(allow_blank=True, help_text="The run's status, or an approval's outcome.")
    severity = serializers.ChoiceField(choices=[choice.value for choice in InboxItem.Severity])
    read = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    payload = serializers.DictField()


@extend_schema_field({"type": "boolean", "enum": [True]})
class OnlyTrueField(serializers.BooleanField):
    def to_internal_value(self, data: object) -> bool:
        if data is not True:
            raise serializers.ValidationError("must be true")
        return True


class InboxReadSerializer(serializers.Serializer):
    """`{ids: [...]}` or `{all: true}`; ids that are not the caller's are ignored."""

    ids = serializers.ListField(
        child=StrictCharField(allow_blank=True, trim_whitespace=False), required=False
    )
    all = OnlyTrueField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "ids" not in attrs and "all" not in attrs:
            raise serializers.ValidationError({"ids": ["Send {ids: [...]} or {all: true}."]})
        return attrs


class InboxUpdatedSerializer(serializers.Serializer):
    updated = serializers.IntegerField(min_value=0)
