from __future__ import annotations

from django.contrib import admin
from django.urls import converters, include, path, register_converter
from django.urls.resolvers import URLPattern, URLResolver

from accounts import api as accounts_api
from accounts import views as accounts_views
from acp import api as acp_api
from agents import api as agents_api
from agentsite import api as site_api
from audit import api as audit_api
from chat import api as chat_api
from chat import files_api, usage_api
from mcpservers import api as mcp_api


class WorkspacePathConverter(converters.PathConverter):
    """A path in a session's workspace: any characters, newlines too (Django's `path` stops at one, so such
    a file an agent made could not be reached and its URL fell through to a 404 page instead of the API's)."""

    regex = r"[\s\S]+"


register_converter(WorkspacePathConverter, "workspacepath")

api_v1: list[URLPattern | URLResolver] = [
    path("version", site_api.VersionApi.as_view(), name="version"),
    path("schema/", site_api.SchemaApi.as_view(), name="schema"),
    path("docs/", site_api.DocsApi.as_view(), name="docs"),
    path("auth/keys", accounts_api.KeyListCreateApi.as_view(), name="keys"),
    path("auth/keys/<str:key_id>", accounts_api.KeyDetailApi.as_view(), name="key-detail"),
    path("auth/ws-ticket", accounts_api.WsTicketApi.as_view(), name="ws-ticket"),
    path("agents", agents_api.AgentListApi.as_view(), name="agents"),
    path("agents/<str:name>", agents_api.AgentDetailApi.as_view(), name="agent-detail"),
    path("agents/<str:name>/tools", agents_api.AgentToolListApi.as_view(), name="agent-tools"),
    path("agents/<str:name>/tools/<str:tool>", agents_api.AgentToolApi.as_view(), name="agent-tool"),
    path(
        "agents/<str:name>/tools/<str:tool>/toggle",
        agents_api.AgentToolToggleApi.as_view(),
        name="agent-tool-toggle",
    ),
    path("agents/<str:name>/config/acp", acp_api.AgentRunnerListApi.as_view(), name="agent-acp-runners"),
    path(
        "agents/<str:name>/config/acp/<str:runner>", acp_api.AgentRunnerApi.as_view(), name="agent-acp-runner"
    ),
    path(
        "agents/<str:name>/config/acp/<str:runner>/test",
        acp_api.AgentRunnerTestApi.as_view(),
        name="agent-acp-runner-test",
    ),
    path("agents/<str:name>/config/mcp", mcp_api.AgentMcpServerListApi.as_view(), name="agent-mcp-servers"),
    path(
        "agents/<str:name>/config/mcp/<str:server>",
        mcp_api.AgentMcpServerApi.as_view(),
        name="agent-mcp-server",
    ),
    path(
        "agents/<str:name>/config/mcp/<str:server>/test",
        mcp_api.AgentMcpServerTestApi.as_view(),
        name="agent-mcp-server-test",
    ),
    path("providers", agents_api.ProviderListApi.as_view(), name="providers"),
    path("providers/active", agents_api.ProviderActiveApi.as_view(), name="provider-active"),
    path("providers/<str:pk>", agents_api.ProviderDetailApi.as_view(), name="provider-detail"),
    path("providers/<str:pk>/test", agents_api.ProviderTestApi.as_view(), name="provider-test"),
    path("chat/sessions", chat_api.SessionListApi.as_view(), name="sessions"),
    path("chat/sessions/<str:session_id>", chat_api.SessionDetailApi.as_view(), name="session-detail"),
    path("chat/sessions/<str:session_id>/messages", chat_api.MessageListApi.as_view(), name="messages"),
    path(
        "chat/sessions/<str:session_id>/messages/<str:message_id>",
        chat_api.MessageDetailApi.as_view(),
        name="message-detail",
    ),
    path(
        "chat/sessions/<str:session_id>/messages/<str:message_id>/steer",
        chat_api.MessageSteerApi.as_view(),
        name="message-steer",
    ),
    path("chat/sessions/<str:session_id>/cancel", chat_api.CancelApi.as_view(), name="cancel"),
    path(
        "chat/sessions/<str:session_id>/confirmations/<str:confirmation_id>",
        chat_api.ConfirmationApi.as_view(),
        name="confirmation",
    ),
    path("chat/sessions/<str:session_id>/events", chat_api.EventStreamApi.as_view(), name="events"),
    path("chat/sessions/<str:session_id>/files", files_api.FileListApi.as_view(), name="files"),
    path(
        "chat/sessions/<str:session_id>/files/<workspacepath:path>", files_api.FileApi.as_view(), name="file"
    ),
    path("usage", usage_api.UsageApi.as_view(), name="usage"),
    path("audit", audit_api.AuditListApi.as_view(), name="audit"),
    path("", include("cron.urls")),  # cron jobs and inbox (docs/protocol.md §2)
]

urlpatterns = [
    path("api/v1/", include((api_v1, "api"))),
    path("healthz", site_api.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("setup/", accounts_views.setup, name="setup"),
    path("login/", accounts_views.LoginView.as_view(), name="login"),
    path("logout/", accounts_views.LogoutView.as_view(), name="logout"),
    path("account/password/", accounts_views.PasswordChangeView.as_view(), name="password_change"),
    path(
        "account/password/done/", accounts_views.PasswordChangeDoneView.as_view(), name="password_change_done"
    ),
    path("", include("portal.urls")),
]

handler404 = "agentsite.views.not_found"
handler500 = "agentsite.views.server_error"
