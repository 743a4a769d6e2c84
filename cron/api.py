"""Cron and inbox REST API (docs/protocol.md §2 "Cron jobs and inbox").

Thin views over cron/services.py (jobs and runs) and cron/inbox.py.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentsite.errors import ApiError
from agentsite.pagination import CursorPage
from cron import inbox, runner, services
from cron.exceptions import CronError
from cron.models import CronJob, InboxItem
from cron.specs import SpecError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


class RunPage(CursorPage):
    ordering = ("-started_at", "-id")


def _invalid(exc: SpecError) -> ApiError:
    return ApiError(400, "invalid", str(exc), fields=exc.fields)


def _job(request: Request, job_id: str) -> CronJob:
    try:
        return services.job_get_for_user(user=request.user, job_id=job_id)
    except CronError as exc:
        raise ApiError(exc.status, exc.code, exc.message) from None


def _item(request: Request, item_id: str) -> InboxItem:
    try:
        return inbox.inbox_item_get_for_user(user=request.user, item_id=item_id)
    except CronError as exc:
        raise ApiError(exc.status, exc.code, exc.message) from None


class JobListApi(generics.GenericAPIView):
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(services.job_list_for_user(user=request.user))
        return self.get_paginated_response([job.to_dict() for job in page])

    def post(self, request: Request) -> Response:
        try:
            job = services.job_create(owner=request.user, data=request.data)
        except SpecError as exc:
            raise _invalid(exc) from None
        return Response(job.to_dict(), status=200)


class JobDetailApi(APIView):
    def get(self, request: Request, job_id: str) -> Response:
        return Response(_job(request, job_id).to_dict())

    def put(self, request: Request, job_id: str) -> Response:
        return self._update(request, job_id, partial=False)

    def patch(self, request: Request, job_id: str) -> Response:
        return self._update(request, job_id, partial=True)

    def _update(self, request: Request, job_id: str, *, partial: bool) -> Response:
        job = _job(request, job_id)
        try:
            job = services.job_update(job=job, data=request.data, partial=partial)
        except SpecError as exc:
            raise _invalid(exc) from None
        return Response(job.to_dict())

    def delete(self, request: Request, job_id: str) -> Response:
        job = _job(request, job_id)
        services.job_delete(job=job)
        return Response({"id": job_id, "deleted": True})


class JobRunApi(APIView):
    def post(self, request: Request, job_id: str) -> Response:
        run = services.run_start_manual(job=_job(request, job_id))
        if not run.is_finished:
            async_to_sync(runner.spawn_run_async)(run.id)  # in the serving loop; answers at once
        return Response({"run_id": run.id}, status=202)


class JobPauseApi(APIView):
    def post(self, request: Request, job_id: str) -> Response:
        return Response(services.job_pause(job=_job(request, job_id)).to_dict())


class JobResumeApi(APIView):
    def post(self, request: Request, job_id: str) -> Response:
        return Response(services.job_resume(job=_job(request, job_id)).to_dict())


class JobHistoryApi(generics.GenericAPIView):
    pagination_class = RunPage

    def get(self, request: Request, job_id: str) -> Response:
        page = self.paginate_queryset(services.run_list_for_job(job=_job(request, job_id)))
        return self.get_paginated_response([run.to_dict() for run in page])


class InboxListApi(generics.GenericAPIView):
    def get(self, request: Request) -> Response:
        unread_only = _flag(request.query_params.get("unread_only", ""), "unread_only")
        items = inbox.inbox_list_for_user(user=request.user, unread_only=unread_only)
        page = self.paginate_queryset(items)
        return self.get_paginated_response([item.to_dict() for item in page])


class InboxReadApi(APIView):
    def post(self, request: Request) -> Response:
        data: Any = request.data
        if not isinstance(data, dict):
            raise ApiError(400, "invalid", "Send {ids: [...]} or {all: true}.")
        every, ids = data.get("all"), data.get("ids")
        if every is not None and every is not True:
            raise ApiError(400, "invalid", "all: must be true", fields={"all": ["must be true"]})
        if every is None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
            problem = {"ids": ["must be a list of strings"]}
            raise ApiError(400, "invalid", "ids: must be a list of item ids", fields=problem)
        updated = inbox.inbox_mark_read(user=request.user, ids=ids, every=every is True)
        return Response({"updated": updated})


class InboxItemApi(APIView):
    def get(self, request: Request, item_id: str) -> Response:
        return Response(_item(request, item_id).to_dict())

    def delete(self, request: Request, item_id: str) -> Response:
        inbox.inbox_item_delete(item=_item(request, item_id))
        return Response({"id": item_id, "deleted": True})


def _flag(raw: str, name: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ApiError(400, "invalid", f"{name} must be true or false.", fields={name: ["must be true or false"]})
