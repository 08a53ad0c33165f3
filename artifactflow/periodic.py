"""The workers' periodic tasks: each app names its own, made or updated at every migrate."""


def periodic_ensure(*, name: str, func: str, minutes: int) -> None:
    """django-q2's scheduler runs `func` (a dotted path) every `minutes`, in one worker."""
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name=name, defaults={"func": func, "schedule_type": Schedule.MINUTES, "minutes": minutes, "repeats": -1}
    )
