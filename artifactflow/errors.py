import re

from django.views.debug import SafeExceptionReporterFilter


class SecretsHiddenFilter(SafeExceptionReporterFilter):
    """Django's filter, hiding also settings (and nested keys) that hold a
    URL or an address, where a password may be written."""

    hidden_settings = re.compile(
        SafeExceptionReporterFilter.hidden_settings.pattern + "|URL|LOCATION|ADDRESS|DSN", flags=re.I
    )
