from django import forms
from django.contrib.auth.models import Group
from django.utils.translation import gettext_lazy as _

from artifactflow.names import name_line
from artifacts.services import artifact_upload_check
from artifacts.uploads import UploadError


class LibraryDocumentForm(forms.Form):
    """Adding a document on the Library page: a file, an optional title, and
    optionally one of the user's groups to limit it to. The file's text is
    read when the document is created (services.library_document_create), once."""

    file = forms.FileField(label=_("File"), help_text=_("Markdown, text, Word (.docx) or PDF."))
    title = forms.CharField(
        label=_("Title"), max_length=300, required=False, help_text=_("The file's name when left empty.")
    )
    group = forms.ModelChoiceField(
        label=_("Visible to"), queryset=Group.objects.none(), required=False, empty_label=_("Everyone")
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        # A user in no group is offered no choice, and any group posted is refused.
        self.fields["group"].queryset = user.groups.order_by("name")
        self.groups_offered = self.fields["group"].queryset.exists()

    def clean_file(self):
        uploaded_file = self.cleaned_data["file"]
        try:
            artifact_upload_check(size=uploaded_file.size)
        except UploadError as error:
            raise forms.ValidationError(str(error)) from None
        return uploaded_file

    def clean_title(self):
        # One line, without what hides or reorders text (a right-to-left override, zero-width spaces).
        return name_line(self.cleaned_data["title"])
