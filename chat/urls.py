from __future__ import annotations

from django.urls import path

from chat import views
from chat.portal import cron_pages, settings_pages

app_name = "portal"
urlpatterns = [
    path("", views.home, name="home"),
    path("chat/new", views.new_chat, name="new-chat"),
    path("chat/<str:session_id>", views.chat, name="chat"),
    path("settings/keys", settings_pages.keys, name="keys"),
    path("settings/agents", settings_pages.agents, name="agents"),
    path("settings/agents/<str:name>", settings_pages.agent_detail, name="agent"),
    path("settings/providers", settings_pages.providers, name="providers"),
    path("jobs", cron_pages.cron, name="cron"),
    path("jobs/preview", cron_pages.cron_preview, name="cron-preview"),
    path("jobs/<str:job_id>", cron_pages.cron_job, name="cron-job"),
    path("inbox", cron_pages.inbox, name="inbox"),
]
