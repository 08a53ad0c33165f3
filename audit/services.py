"""The audit trail: append-only records of who did what, when and from where
(AuditEvent). Views and services record actions (audit_record); changes to
the models an app registers (changes_track) are recorded by signals, whoever
makes them: the admin, single sign-on, a command (then by nobody: the
system). A record is written in the transaction of what it records, so a
change rolled back leaves none and one committed always has one.

Who and from where come from the request being served (AuditContextMiddleware
sets them for its thread) unless the caller says.
"""

import contextlib
import contextvars
import datetime
import json
from dataclasses import dataclass

from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from .models import AuditEvent

# Shown in place of a secret's values: that it changed is recorded, never what it was or became.
SECRET = "***"
# The longest value kept of a field: a record says what changed, it is no copy of the data.
VALUE_CHARS = 500


@dataclass(frozen=True)
class Context:
    user: object = None
    address: str | None = None


_context: contextvars.ContextVar[Context | None] = contextvars.ContextVar("audit_context", default=None)


@contextlib.contextmanager
def audit_context(*, user, address: str | None):
    """Records made inside are by `user`, from `address`."""
    token = _context.set(Context(user=user, address=address))
    try:
        yield
    finally:
        _context.reset(token)


def audit_record(
    *,
    action: str,
    obj: models.Model | None = None,
    actor=None,
    actor_name: str | None = None,
    address: str | None = None,
    changes: dict | None = None,
    detail: dict | None = None,
) -> AuditEvent:
    context = _context.get() or Context()
    actor = actor if actor is not None else context.user
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor = None
    if actor_name is None:
        actor_name = actor.get_username() if actor is not None else ""
    return AuditEvent.objects.create(
        actor=actor,
        actor_name=actor_name[:150],
        action=action,
        object_type=obj._meta.label_lower if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        object_repr=str(obj)[:200] if obj is not None else "",
        address=address if address is not None else context.address,
        changes=_json_plain(changes or {}),
        detail=_json_plain(detail or {}),
    )


def audit_prune(*, before: datetime.datetime) -> int:
    """Deletes the records made before `before` (their retention); returns how many."""
    # The only deletion there is: the queryset's own delete() refuses.
    return models.QuerySet.delete(AuditEvent.objects.filter(at__lt=before))[0]


def changes_track(model, *, secrets: tuple[str, ...] = (), ignored: tuple[str, ...] = ()) -> None:
    """Records every creation, change and deletion of `model`'s rows, and of
    their many-to-many sets, with each changed field's value before and
    after; `secrets` only as changed, `ignored` not at all."""
    tracker = _Tracker(model, secrets=set(secrets), ignored=set(ignored))
    uid = f"audit-{model._meta.label_lower}"
    pre_save.connect(tracker.before, sender=model, weak=False, dispatch_uid=uid)
    post_save.connect(tracker.after, sender=model, weak=False, dispatch_uid=uid)
    post_delete.connect(tracker.deleted, sender=model, weak=False, dispatch_uid=uid)
    for field in model._meta.many_to_many:
        through = getattr(model, field.name).through
        m2m_changed.connect(tracker.m2m, sender=through, weak=False, dispatch_uid=f"{uid}-{field.name}")


class _Tracker:
    def __init__(self, model, *, secrets: set[str], ignored: set[str]):
        self.model, self.secrets, self.ignored = model, secrets, ignored
        self.fields = [
            field
            for field in model._meta.concrete_fields
            if not field.primary_key and field.name not in ignored and field.attname not in ignored
        ]

    def _values(self, instance) -> dict:
        return {field.name: _plain(field.value_from_object(instance)) for field in self.fields}

    def before(self, sender, instance, raw=False, **kwargs):
        if raw:
            return
        old = None
        if instance.pk is not None and not instance._state.adding:
            old = self.model._base_manager.filter(pk=instance.pk).first()
        instance._audit_before = self._values(old) if old is not None else None

    def after(self, sender, instance, created, raw=False, update_fields=None, **kwargs):
        if raw:
            return
        before = getattr(instance, "_audit_before", None)
        after = self._values(instance)
        if created or before is None:
            changes = {
                name: [None, self._shown(name, value)] for name, value in after.items() if value not in ("", None)
            }
            audit_record(action=AuditEvent.Action.CREATE, obj=instance, changes=changes)
            return
        changes = {
            name: [self._shown(name, before[name]), self._shown(name, value)]
            for name, value in after.items()
            if before.get(name) != value
        }
        if changes:
            audit_record(action=AuditEvent.Action.CHANGE, obj=instance, changes=changes)

    def deleted(self, sender, instance, **kwargs):
        changes = {name: [self._shown(name, value), None] for name, value in self._values(instance).items()}
        audit_record(action=AuditEvent.Action.DELETE, obj=instance, changes=changes)

    def m2m(self, sender, instance, action, reverse, model, pk_set, **kwargs):
        """A set changed from this model's side (user.groups.add), or from the
        other's (group.user_set.add): each of this model's rows that gained or
        lost members is recorded as changed."""
        if action not in ("post_add", "post_remove", "pre_clear"):
            return
        field = self._m2m_field(sender)
        if reverse:
            if action == "pre_clear" or not pk_set or model is not self.model:
                return
            for obj in self.model._base_manager.filter(pk__in=pk_set):
                self._m2m_record(obj, field=field.name, names=[str(instance)], added=action == "post_add")
            return
        if not isinstance(instance, self.model):
            return
        if action == "pre_clear":
            pk_set = set(getattr(instance, field.name).values_list("pk", flat=True))
        if pk_set:
            names = sorted(str(item) for item in model._base_manager.filter(pk__in=pk_set))
            self._m2m_record(instance, field=field.name, names=names, added=action == "post_add")

    def _m2m_record(self, obj, *, field: str, names: list[str], added: bool) -> None:
        change = [[], names] if added else [names, []]
        audit_record(action=AuditEvent.Action.CHANGE, obj=obj, changes={field: change})

    def _m2m_field(self, through):
        return next(f for f in self.model._meta.many_to_many if getattr(self.model, f.name).through is through)

    def _shown(self, name: str, value):
        if name in self.secrets:
            return SECRET if value not in ("", None) else value
        return value


def _json_plain(value: dict) -> dict:
    """Keys (a UUID, a date) as JSON can hold them."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def _plain(value):
    """A field's value as JSON keeps it, cut short if long."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value[:VALUE_CHARS] if isinstance(value, str) else value
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return json.loads(text) if len(text) <= VALUE_CHARS else text[:VALUE_CHARS]
