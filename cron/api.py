"""Cron and inbox REST API (docs/protocol.md §2 "Cron jobs and inbox").

Thin views over cron/services.py (jobs and runs) and cron/inbox.py.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import request_user
from agentsite.errors import ApiError
from agentsite.openapi import PAGE_PARAMETERS, errors, flag_parameter, page_of
from agentsite.pagination import CursorPage
from agentsite.query import query_flag
from agentsite.validation import InvalidInput, invalid
from cron import inbox, runner, services
from cron.exceptions import CronError
from cron.models import CronJob, CronRun, InboxItem
from cron.serializers import (
    DeletedSerializer,
    InboxItemSerializer,
    InboxReadSerializer,
    InboxUpdatedSerializer,
    Job,
    RunSerializer,
    RunStartedSerializer,
)
from cron.specs import JobSpec, SpecError


class RunPage(CursorPage):
    ordering = ("-started_at", "-id")


JOB_NOT_FOUND = errors({404: "not_found: no such job of yours"})
JOB_INVALID = "invalid: `fields` names each problem (dotted paths: `schedule.cron`)"
ITEM_NOT_FOUND = errors({404: "not_found: no such inbox item of yours"})


def _invalid(exc: SpecError) -> InvalidInput:
    return invalid(exc.fields)


def _job(request: Request, job_id: str) -> CronJob:
    try:
        return services.job_get_for_user(user=request_user(request), job_id=job_id)
    except CronError as exc:
        raise ApiError(exc.status, exc.code, exc.message) from None


def _item(request: Request, item_id: str) -> InboxItem:
    try:
        return inbox.inbox_item_get_for_user(user=request_user(request), item_id=item_id)
    except CronError as exc:
        raise ApiError(exc.status, exc.code, exc.message) from None


class JobListApi(generics.GenericAPIView[CronJob]):
    @extend_schema(operation_id="cron_jobs_list", parameters=PAGE_PARAMETERS, responses=page_of(Job, "Job"))
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(services.job_list_for_user(user=request_user(request)))
        return self.get_paginated_response([job.to_dict() for job in page or []])

    @extend_schema(
        operation_id="cron_jobs_create",
        examples=[
            OpenApiExample(
                "Every weekday at 9:00 in Berlin",
                {
                    "name": "Morning summary",
                    "schedule": {"type": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
                    "request": {"input": [{"content": [{"text": "Summarise yesterday's notes."}]}]},
                    "dispatch": {"target": {"session_id": "morning-summary"}, "mode": "final"},
                },
                request_only=True,
            ),
            OpenApiExample(
                "A text every hour",
                {
                    "name": "Stretch",
                    "task_type": "text",
                    "text": "Time to stretch.",
                    "schedule": {"type": "interval", "every_seconds": 3600},
                    "dispatch": {"target": {"session_id": "reminders"}},
                    "save_result_to_inbox": False,
                },
                request_only=True,
            ),
        ],
        request=JobSpec,
        responses={200: Job, **errors({400: f"{JOB_INVALID}; limit_reached: AGENTSITE_USER_MAX_CRON_JOBS"})},
    )
    def post(self, request: Request) -> Response:
        try:
            job = services.job_create(owner=request_user(request), data=request.data)
        except SpecError as exc:
            raise _invalid(exc) from None
        return Response(job.to_dict(), status=200)


class JobDetailApi(APIView):
    @extend_schema(operation_id="cron_jobs_retrieve", responses={200: Job, **JOB_NOT_FOUND})
    def get(self, request: Request, job_id: str) -> Response:
        return Response(_job(request, job_id).to_dict())

    @extend_schema(
        operation_id="cron_jobs_replace",
        request=JobSpec,
        responses={200: Job, **JOB_NOT_FOUND, **errors({400: JOB_INVALID})},
    )
    def put(self, request: Request, job_id: str) -> Response:
        return self._update(request, job_id, partial=False)

    @extend_schema(
        operation_id="cron_jobs_update",
        request=JobSpec,
        description="Merges the given top-level keys into the job (nested objects are replaced whole).",
        responses={200: Job, **JOB_NOT_FOUND, **errors({400: JOB_INVALID})},
    )
    def patch(self, request: Request, job_id: str) -> Response:
        return self._update(request, job_id, partial=True)

    def _update(self, request: Request, job_id: str, *, partial: bool) -> Response:
        job = _job(request, job_id)
        try:
            job = services.job_update(job=job, data=request.data, partial=partial)
        except SpecError as exc:
            raise _invalid(exc) from None
        return Response(job.to_dict())

    @extend_schema(operation_id="cron_jobs_delete", responses={200: DeletedSerializer, **JOB_NOT_FOUND})
    def delete(self, request: Request, job_id: str) -> Response:
        job = _job(request, job_id)
        services.job_delete(job=job)
        return Response({"id": job_id, "deleted": True})


class JobRunApi(APIView):
    @extend_schema(
        operation_id="cron_jobs_run",
        request=None,
        description="Starts a run now; while one is going, answers the id of a `skipped` run.",
        responses={202: RunStartedSerializer, **JOB_NOT_FOUND},
    )
    def post(self, request: Request, job_id: str) -> Response:
        run = services.run_start_manual(job=_job(request, job_id))
        if not run.is_finished:
            async_to_sync(runner.spawn_run_async)(run.id)  # in the serving loop; answers at once
        return Response({"run_id": run.id}, status=202)


class JobPauseApi(APIView):
    @extend_schema(operation_id="cron_jobs_pause", request=None, responses={200: Job, **JOB_NOT_FOUND})
    def post(self, request: Request, job_id: str) -> Response:
        return Response(services.job_pause(job=_job(request, job_id)).to_dict())


class JobResumeApi(APIView):
    @extend_schema(operation_id="cron_jobs_resume", request=None, responses={200: Job, **JOB_NOT_FOUND})
    def post(self, request: Request, job_id: str) -> Response:
        return Response(services.job_resume(job=_job(request, job_id)).to_dict())


class JobHistoryApi(generics.GenericAPIView[CronRun]):
    pagination_class = RunPage

    @extend_schema(
        operation_id="cron_jobs_history",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(RunSerializer), **JOB_NOT_FOUND},
    )
    def get(self, request: Request, job_id: str) -> Response:
        page = self.paginate_queryset(services.run_list_for_job(job=_job(request, job_id)))
        return self.get_paginated_response([run.to_dict() for run in page or []])


class InboxListApi(generics.GenericAPIView[InboxItem]):
    @extend_schema(
        operation_id="inbox_list",
        parameters=[
            flag_parameter("unread_only", "Only unread items"),
            *PAGE_PARAMETERS,
        ],
        responses={
            200: page_of(InboxItemSerializer),
            **errors({400: "invalid: unread_only or a page parameter"}),
        },
    )
    def get(self, request: Request) -> Response:
        unread_only = query_flag(request.query_params.get("unread_only"), "unread_only")
        items = inbox.inbox_list_for_user(user=request_user(request), unread_only=unread_only)
        page = self.paginate_queryset(items)
        return self.get_paginated_response([item.to_dict() for item in page or []])


class InboxReadApi(APIView):
    @extend_schema(
        operation_id="inbox_mark_read",
        examples=[OpenApiExample("Everything", {"all": True}, request_only=True)],
        request=InboxReadSerializer,
        responses={
            200: InboxUpdatedSerializer,
            **errors({400: "invalid: neither a list of ids nor all: true"}),
        },
    )
    def post(self, request: Request) -> Response:
        data = InboxReadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ids, every = data.validated_data.get("ids"), data.validated_data.get("all", False)
        return Response({"updated": inbox.inbox_mark_read(user=request_user(request), ids=ids, every=every)})


class InboxItemApi(APIView):
    @extend_schema(operation_id="inbox_retrieve", responses={200: InboxItemSerializer, **ITEM_NOT_FOUND})
    def get(self, request: Request, item_id: str) -> Response:
        return Response(_item(request, item_id).to_dict())

    @extend_schema(operation_id="inbox_delete", responses={200: DeletedSerializer, **ITEM_NOT_FOUND})
    def delete(self, request: Request, item_id: str) -> Response:
        inbox.inbox_item_delete(item=_item(request, item_id))
        return Response({"id": item_id, "deleted": True})
