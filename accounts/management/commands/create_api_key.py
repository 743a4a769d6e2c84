"""`manage.py create_api_key --user NAME [--create-user] [--staff] [--name LABEL]` prints the new key."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for a user and print it (the only time it is shown)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="username that owns the key")
        parser.add_argument("--create-user", action="store_true", help="create the user if it does not exist")
        parser.add_argument("--staff", action="store_true", help="make the user staff (site configuration)")
        parser.add_argument("--name", default="", help="a label for the key")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        user = User.objects.filter(username=options["user"]).first()
        if user is None:
            if not options["create_user"]:
                raise CommandError(f"No user named {options['user']!r}; pass --create-user to create one.")
            user = User.objects.create_user(username=options["user"])
        if options["staff"] and not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
        _, secret = api_key_create(user=user, name=options["name"])
        self.stdout.write(secret)
