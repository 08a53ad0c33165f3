"""A plain HTTP request as an ASGI server hands it to the application."""

UPLOAD_PATH = "/c/00000000-0000-0000-0000-000000000000/artifacts/"


def http_scope(*, method: str = "POST", path: str = UPLOAD_PATH, headers=()) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
