import datetime

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .usage import DAY, DAYS_BY_DAY, KIND_LABELS, MONTH, WEEK, UsageFilter, usage_models

# A period longer than this is refused: more than anyone compares on one page.
MAX_DAYS = 3 * 366


class UsageFilterForm(forms.Form):
    """The usage page's filters, from its query string. Everyone's figures
    for whoever may see them (`everyone`); otherwise the person's own, and
    naming anyone else (or a group) is refused."""

    start = forms.DateField(label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(label=_("To"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    grain = forms.ChoiceField(
        label=_("By"),
        required=False,
        choices=[(DAY, _("day")), (WEEK, _("week")), (MONTH, _("month"))],
    )
    person = forms.ModelChoiceField(label=_("Person"), required=False, queryset=get_user_model().objects.none())
    group = forms.ModelChoiceField(label=_("Group"), required=False, queryset=Group.objects.none())
    model = forms.ChoiceField(label=_("Model"), required=False)
    kind = forms.ChoiceField(
        label=_("Kind"), required=False, choices=[("", "---------"), *((k, v) for k, v in KIND_LABELS.items())]
    )

    def __init__(self, data, *, user, everyone: bool):
        # The period shown when none is asked for, in the fields too: this month, by day.
        today = timezone.localdate()
        data = data.copy()
        for name, default in (("start", today.replace(day=1)), ("end", today), ("grain", DAY)):
            if not data.get(name):
                data[name] = default.isoformat() if isinstance(default, datetime.date) else default
        super().__init__(data)
        self.user, self.everyone = user, everyone
        self.fields["model"].choices = [("", "---------"), *((name, name) for name in usage_models())]
        if everyone:
            self.fields["person"].queryset = get_user_model().objects.order_by(get_user_model().USERNAME_FIELD)
            self.fields["group"].queryset = Group.objects.order_by("name")
        else:
            del self.fields["person"], self.fields["group"]

    def clean(self):
        data = super().clean()
        start, end = data.get("start"), data.get("end")
        if start is None or end is None:
            return data
        if start > end:
            raise forms.ValidationError(_("The period's start is after its end."))
        if (end - start).days > MAX_DAYS:
            raise forms.ValidationError(_("Choose a period of at most three years."))
        data["start"], data["end"] = start, end
        grain = data.get("grain") or DAY
        # A long period by day would be a page of hundreds of rows: it is shown by week.
        if grain == DAY and (end - start).days >= DAYS_BY_DAY:
            grain = WEEK
        # And the field says so.
        data["grain"] = self.data["grain"] = grain
        return data

    def usage_filter(self) -> UsageFilter:
        data = self.cleaned_data
        person = data.get("person") if self.everyone else self.user
        group = data.get("group")
        return UsageFilter(
            start=data["start"],
            end=data["end"],
            grain=data["grain"],
            person_id=person.pk if person else None,
            group_id=group.pk if group else None,
            model=data.get("model", ""),
            kind=data.get("kind", ""),
        )


def usage_presets(*, today: datetime.date) -> list[tuple[str, datetime.date, datetime.date, str]]:
    """The periods offered as links: name, start, end, grain."""
    month = today.replace(day=1)
    last_month_end = month - datetime.timedelta(days=1)
    return [
        (_("Today"), today, today, DAY),
        (_("Last 7 days"), today - datetime.timedelta(days=6), today, DAY),
        (_("This month"), month, today, DAY),
        (_("Last month"), last_month_end.replace(day=1), last_month_end, DAY),
        (_("This year"), today.replace(month=1, day=1), today, MONTH),
    ]
