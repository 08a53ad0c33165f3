from importlib import import_module

import pytest
from django.apps import apps

from conversations.models import Conversation
from tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db


def test_titles_stored_before_names_were_cleaned_are_cleaned_and_keep_their_place():
    spoofed = ConversationFactory(title="热泵\u202eexe.pdf\u200f\u2066报告\u2069\u200b")
    chinese = ConversationFactory(title="空气源热泵的低温效率")
    untitled = ConversationFactory(title="")
    updated_at = dict(Conversation.objects.values_list("pk", "updated_at"))

    import_module("conversations.migrations.0009_titles_cleaned").titles_clean(apps, None)

    assert dict(Conversation.objects.values_list("pk", "title")) == {
        spoofed.pk: "热泵exe.pdf报告",
        chinese.pk: "空气源热泵的低温效率",
        untitled.pk: "",
    }
    assert dict(Conversation.objects.values_list("pk", "updated_at")) == updated_at
