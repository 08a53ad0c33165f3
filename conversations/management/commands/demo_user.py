import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Create (or reset) the local demo login and print it. Only with DEBUG on."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")

    def handle(self, *args, username, **options):
        if not settings.DEBUG:
            raise CommandError("The demo login exists only for local use: set DEBUG=1.")
        password = secrets.token_urlsafe(9)
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write(self.style.SUCCESS(f"Demo login (staff, also for /admin/): {username} / {password}"))
