"""The portal's own system checks (artifactflow.checks)."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError


def test_without_a_secret_key_the_checks_say_to_migrate(settings):
    settings.SECRET_KEY = ""

    with pytest.raises(SystemCheckError, match=r"artifactflow.E001.*no secret key yet(.|\n)*manage.py migrate"):
        call_command("check")
