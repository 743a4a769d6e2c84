"""Cron and inbox routes, included under /api/v1/ by agentsite/urls.py."""

from __future__ import annotations

from django.urls import path

from cron import api

urlpatterns = [
    path("cron/jobs", api.JobListApi.as_view(), name="cron-jobs"),
    path("cron/jobs/<str:job_id>", api.JobDetailApi.as_view(), name="cron-job"),
    path("cron/jobs/<str:job_id>/run", api.JobRunApi.as_view(), name="cron-job-run"),
    path("cron/jobs/<str:job_id>/pause", api.JobPauseApi.as_view(), name="cron-job-pause"),
    path("cron/jobs/<str:job_id>/resume", api.JobResumeApi.as_view(), name="cron-job-resume"),
    path("cron/jobs/<str:job_id>/history", api.JobHistoryApi.as_view(), name="cron-job-history"),
    path("inbox", api.InboxListApi.as_view(), name="inbox"),
    path("inbox/read", api.InboxReadApi.as_view(), name="inbox-read"),
    path("inbox/<str:item_id>", api.InboxItemApi.as_view(), name="inbox-item"),
]
