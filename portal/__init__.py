"""The portal: the browser pages of every app (chats, settings, cron jobs, inbox).

Pages read through the apps' services and models; every write is made by the browser through the REST
API and the chat socket (static/js/), so permissions and validation live in one place.
"""
