from __future__ import annotations

from django.urls import path

from chat import views

app_name = "portal"
urlpatterns = [
    path("", views.home, name="home"),
    path("chat/new", views.new_chat, name="new-chat"),
    path("chat/<str:session_id>", views.chat, name="chat"),
]
