"""Admin for cron jobs, runs and inbox items; actions call the services (run now, pause, resume)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from cron import runner, services
from cron.models import CronJob, CronRun, InboxItem

# A tuple, not a list: one value fits both `fields` and `readonly_fields` as django-stubs types them.
RUN_INLINE_FIELDS = ("id", "trigger", "status", "started_at", "finished_at", "error")


class CronRunInline(admin.TabularInline):
    model = CronRun
    extra = 0
    fields = RUN_INLINE_FIELDS
    readonly_fields = RUN_INLINE_FIELDS
    can_delete = False
    show_change_link = True
    ordering = ["-started_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CronJob)
class CronJobAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "owner",
        "enabled",
        "task_type",
        "agent_name",
        "next_run_at",
        "last_run_at",
        "last_status",
    ]
    list_filter = ["enabled", "task_type", "last_status", "agent_name"]
    search_fields = ["id", "name", "owner__username"]
    raw_id_fields = ["owner"]
    readonly_fields = ["id", "next_run_at", "last_run_at", "last_status", "created_at", "updated_at"]
    inlines = [CronRunInline]
    actions = ["run_now", "pause", "resume"]

    @admin.action(description="Run the selected jobs now")
    def run_now(self, request: HttpRequest, queryset: QuerySet[CronJob]) -> None:
        started = 0
        for job in queryset:
            run = services.run_start_manual(job=job)
            if not run.is_finished:
                async_to_sync(runner.spawn_run_async)(run.id)
                started += 1
        self.message_user(request, f"Started {started} run(s).", messages.SUCCESS)

    @admin.action(description="Pause the selected jobs")
    def pause(self, request: HttpRequest, queryset: QuerySet[CronJob]) -> None:
        for job in queryset:
            services.job_pause(job=job)
        self.message_user(request, f"Paused {queryset.count()} job(s).", messages.SUCCESS)

    @admin.action(description="Resume the selected jobs")
    def resume(self, request: HttpRequest, queryset: QuerySet[CronJob]) -> None:
        for job in queryset:
            services.job_resume(job=job)
        self.message_user(request, f"Resumed {queryset.count()} job(s).", messages.SUCCESS)


@admin.register(CronRun)
class CronRunAdmin(admin.ModelAdmin):
    list_display = ["id", "job", "trigger", "status", "started_at", "finished_at"]
    list_filter = ["status", "trigger"]
    search_fields = ["id", "job__name", "job__id", "session_id"]
    raw_id_fields = ["job"]
    date_hierarchy = "started_at"


@admin.register(InboxItem)
class InboxItemAdmin(admin.ModelAdmin):
    list_display = ["title", "owner", "source_type", "severity", "status", "read", "created_at"]
    list_filter = ["source_type", "severity", "read", "status"]
    search_fields = ["id", "title", "body", "owner__username", "source_id"]
    raw_id_fields = ["owner"]
    actions = ["mark_read"]

    @admin.action(description="Mark the selected items read")
    def mark_read(self, request: HttpRequest, queryset: QuerySet[InboxItem]) -> None:
        updated = queryset.filter(read=False).update(read=True)
        self.message_user(request, f"Marked {updated} item(s) read.", messages.SUCCESS)
