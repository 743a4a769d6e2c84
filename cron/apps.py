from __future__ import annotations

from django.apps import AppConfig


class CronConfig(AppConfig):
    name = "cron"
    verbose_name = "Scheduled jobs and inbox"
