from django import forms
from django.utils.translation import gettext_lazy as _

from .models import Schedule

WEEKDAYS = [
    (0, _("Mon")),
    (1, _("Tue")),
    (2, _("Wed")),
    (3, _("Thu")),
    (4, _("Fri")),
    (5, _("Sat")),
    (6, _("Sun")),
]


class ScheduleForm(forms.Form):
    """ "Repeat this research": how often, when, and what to ask (projects.schedules.schedule_set)."""

    question = forms.CharField(label=_("Ask each time"), widget=forms.Textarea(attrs={"rows": 2}), max_length=20_000)
    frequency = forms.ChoiceField(label=_("Repeats"), choices=Schedule.Frequency.choices)
    weekdays = forms.TypedMultipleChoiceField(
        label=_("On"), choices=WEEKDAYS, coerce=int, required=False, widget=forms.CheckboxSelectMultiple
    )
    day_of_month = forms.IntegerField(label=_("Day of the month"), min_value=1, max_value=31, initial=1)
    at = forms.TimeField(label=_("At"), widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"))
    time_zone = forms.CharField(label=_("Time zone"), max_length=64)
    allowed_tools = forms.MultipleChoiceField(
        label=_("Tools it may run without asking"), required=False, widget=forms.CheckboxSelectMultiple
    )

    def __init__(self, *args, tools: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["allowed_tools"].choices = tools
