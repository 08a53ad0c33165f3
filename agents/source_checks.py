"""How a configured tool source's definition is checked, told by the tool code
that knows its kind.

The checks need that code (agents.tools.http and agents.tools.mcp parse URL
templates and schemas), and that code imports the models; so a model asks here
rather than importing it, which would close an import circle. Each
tool module registers its check when imported, and AgentsConfig.ready imports
them, so every process that validates a source has them.
"""

from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

_checks: dict[type, Callable[[object], dict[str, str]]] = {}


def source_check_register(*, model: type, check: Callable[[object], dict[str, str]]) -> None:
    """Makes `check` (a source to its problems by field) the check of every `model` row."""
    _checks[model] = check


def source_problems(*, source) -> dict[str, str]:
    """What is wrong with a source's definition, by field; empty when nothing."""
    try:
        check = _checks[type(source)]
    except KeyError:
        # A source saved unchecked would fail only when a turn offers it.
        raise ImproperlyConfigured(f"No check is registered for {type(source).__name__}.") from None
    return check(source)
