from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from artifacts.uploads import UploadError

from .models import LibraryDocument, WebSnapshot
from .services import library_document_retry, library_file_read


class LibraryUploadForm(forms.ModelForm):
    """Adding a document is uploading a file: its text is read while the form
    is validated, so an unreadable file is an error on the form."""

    original_file = forms.FileField(label=_("File"), help_text=_("Markdown, text, Word (.docx) or PDF."))
    title = forms.CharField(max_length=300, required=False, help_text=_("The file's name when left empty."))

    class Meta:
        model = LibraryDocument
        fields = ("original_file", "title", "group")

    def clean_original_file(self):
        uploaded_file = self.cleaned_data["original_file"]
        try:
            converted = library_file_read(uploaded_file=uploaded_file)
        except UploadError as error:
            raise forms.ValidationError(str(error)) from None
        # Not form fields, so the form leaves them on the instance as set here.
        self.instance.content = converted.content
        self.instance.content_type = converted.content_type
        self.file_title = converted.title
        return uploaded_file

    def clean_title(self):
        return self.cleaned_data["title"] or getattr(self, "file_title", "")


@admin.register(LibraryDocument)
class LibraryDocumentAdmin(admin.ModelAdmin):
    list_display = ("title", "content_type", "status", "group", "uploaded_by", "updated_at")
    list_filter = ("status", "content_type", "group")
    actions = ["read_again"]
    search_fields = ("title", "content")
    date_hierarchy = "created_at"
    # Changing a document is correcting its title or extracted text; a new
    # file is a new document.
    fields = (
        "title",
        "content",
        "group",
        "content_type",
        "original_file",
        "uploaded_by",
        "created_at",
        "updated_at",
        "status",
        "error",
    )
    readonly_fields = ("content_type", "original_file", "uploaded_by", "created_at", "updated_at", "status", "error")

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = LibraryUploadForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        return LibraryUploadForm.Meta.fields if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    @admin.action(description=_("Read the selected failed documents again"))
    def read_again(self, request, queryset):
        queued = [
            library_document_retry(user=request.user, document_id=document.pk)
            for document in queryset.filter(status=LibraryDocument.Status.FAILED)
        ]
        self.message_user(request, _("%(count)s documents are being read again.") % {"count": len(queued)})

    def save_model(self, request, obj, form, change):
        if not change:
            obj.uploaded_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(WebSnapshot)
class WebSnapshotAdmin(admin.ModelAdmin):
    """What agents read is evidence: inspected and removed here, never edited."""

    list_display = ("__str__", "url", "conversation", "size", "fetched_at")
    list_select_related = ("conversation",)
    search_fields = ("url", "title")
    date_hierarchy = "fetched_at"
    readonly_fields = ("conversation", "url", "title", "content_type", "text", "digest", "size", "fetched_at")
    raw_id_fields = ("conversation",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
