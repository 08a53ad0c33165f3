from django import forms
from django.contrib.auth.models import Group
from django.utils.translation import gettext_lazy as _

from artifactflow.names import name_line
from artifacts.services import artifact_upload_check
from artifacts.uploads import UploadError


class _FilesInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class FilesField(forms.FileField):
    """One file or several, as a list (Django's documented way to take several)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", _FilesInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        # None for no file: the field's own check says one is needed.
        files = (data if isinstance(data, list | tuple) else [data]) or [None]
        return [super(FilesField, self).clean(file, initial) for file in files]


class LibraryDocumentForm(forms.Form):
    """Adding documents on the Library page: a file, or several, or a .zip of
    them; an optional title (for one file); and optionally one of the user's
    groups to limit them to. One file's text is read at once
    (services.library_document_create); several files' by a worker
    (services.library_documents_queue), once each."""

    file = FilesField(
        label=_("Files"),
        help_text=_("Markdown, text, Word (.docx) or PDF; several at once, or a .zip of them."),
    )
    title = forms.CharField(
        label=_("Title"),
        max_length=300,
        required=False,
        help_text=_("The file's name when left empty. Several files keep their own names."),
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
        uploaded_files = self.cleaned_data["file"]
        try:
            # The request's body is capped at the upload limit too (REQUEST_BODY_MAX_BYTES).
            artifact_upload_check(size=sum(uploaded_file.size for uploaded_file in uploaded_files))
        except UploadError as error:
            raise forms.ValidationError(str(error)) from None
        return uploaded_files

    @property
    def queued(self) -> bool:
        """Whether the files are read by a worker: more than one, or a .zip."""
        files = self.cleaned_data["file"]
        return len(files) > 1 or files[0].name.lower().endswith(".zip")

    def clean_title(self):
        # One line, without what hides or reorders text (a right-to-left override, zero-width spaces).
        return name_line(self.cleaned_data["title"])
