from __future__ import annotations

from django.urls import path

from portal.views import chats, configuration, cron, usage

app_name = "portal"
urlpatterns = [
    path("", chats.home, name="home"),
    path("favicon.ico", chats.favicon, name="favicon"),
    path("chat/new", chats.new_chat, name="new-chat"),
    path("chat/<str:session_id>", chats.chat, name="chat"),
    path("settings/keys", configuration.keys, name="keys"),
    path("settings/agents", configuration.agents, name="agents"),
    path("settings/agents/<str:name>", configuration.agent_detail, name="agent"),
    path("settings/providers", configuration.providers, name="providers"),
    path("jobs", cron.cron, name="cron"),
    path("jobs/preview", cron.cron_preview, name="cron-preview"),
    path("jobs/<str:job_id>", cron.cron_job, name="cron-job"),
    path("inbox", cron.inbox, name="inbox"),
    path("usage", usage.usage, name="usage"),
]
