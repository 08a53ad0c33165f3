from . import services


def theme(request) -> dict:
    """The user's theme, which base.html applies to every page."""
    user = getattr(request, "user", None)
    if user is None or not hasattr(request, "session"):
        return {"theme": "system"}
    return {"theme": services.session_theme(user=user, session=request.session)}
