"""Files a configured tool returns (an image, a PDF): kept as file artifacts of
the conversation, as an upload is, and named to the model by the line it reads."""

from .base import ToolContext

# A tool's file over this is described, not kept.
MAX_FILE_BYTES = 10 * 1024 * 1024
FILE_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
}


def file_artifact_keep(*, context: ToolContext | None, name: str, content: bytes, mime: str) -> str:
    """Keep `content` as a file artifact of the turn's branch; the line the tool's result says of it."""
    from artifacts.models import Artifact
    from artifacts.services import artifact_upload
    from artifacts.uploads import UploadError

    if context is None or context.artifacts is None:
        return f"[a {mime} file of {len(content):,} bytes; not kept: no conversation to keep it in]"
    if len(content) > MAX_FILE_BYTES:
        return f"[a {mime} file of {len(content):,} bytes; not kept: over {MAX_FILE_BYTES:,} bytes]"
    filename = name if "." in name else name + FILE_EXTENSIONS.get(mime, "")
    try:
        artifact = artifact_upload(branch=context.artifacts.branch, filename=filename, data=content, content_type=mime)
    except UploadError as error:
        return f"[a {mime} file of {len(content):,} bytes; not kept: {error}]"
    # The agent's tool made it, not the person: the cleanup and the page say so.
    Artifact.objects.filter(pk=artifact.pk).update(source=Artifact.Source.AGENT)
    return f"[{mime} file of {len(content):,} bytes, kept as the file artifact {artifact.artifact_id}]"
