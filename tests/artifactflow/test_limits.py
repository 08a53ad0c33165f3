"""The request-body cap answers before Django reads a body (artifactflow.limits)."""

import pytest
from asgiref.testing import ApplicationCommunicator

from artifactflow.asgi import application
from tests.asgi import http_scope

REFUSAL = "This file is larger than the upload limit of 1000\xa0bytes."


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.ARTIFACT_UPLOAD_MAX_BYTES = 1000
    settings.REQUEST_BODY_MAX_BYTES = 2000


def _post(*, headers=()):
    return ApplicationCommunicator(application, http_scope(headers=headers))


async def _response(communicator):
    start = await communicator.receive_output(timeout=5)
    body = await communicator.receive_output(timeout=5)
    return start["status"], body["body"].decode()


async def test_a_declared_oversize_body_is_refused_before_any_of_it_is_read():
    communicator = _post(headers=[(b"content-length", b"50000000")])
    # Not one byte of the 50 MB is sent: the answer cannot have waited for it.
    status, text = await _response(communicator)
    await communicator.wait(timeout=5)
    assert (status, text) == (413, REFUSAL)


@pytest.mark.parametrize(
    "headers",
    [[(b"accept-language", b"zh-CN,zh;q=0.9")], [(b"accept-language", b"en"), (b"cookie", b"django_language=zh-hans")]],
)
async def test_the_refusal_speaks_the_browsers_language_or_the_one_chosen_in_the_menu(headers):
    communicator = _post(headers=[(b"content-length", b"50000000"), *headers])
    status, text = await _response(communicator)
    await communicator.wait(timeout=5)
    assert (status, text) == (413, "此文件超过了 1000\xa0字节 的上传上限。")


async def test_an_undeclared_body_is_cut_off_once_it_passes_the_cap():
    communicator = _post()
    for _ in range(3):
        await communicator.send_input({"type": "http.request", "body": b"x" * 900, "more_body": True})
    status, text = await _response(communicator)
    await communicator.wait(timeout=5)
    assert (status, text) == (413, REFUSAL)


@pytest.mark.django_db(transaction=True)
async def test_a_body_under_the_cap_reaches_django():
    communicator = _post(headers=[(b"content-length", b"10")])
    await communicator.send_input({"type": "http.request", "body": b"content=hi"})
    status, text = await _response(communicator)
    # Django answers (CSRF refuses a form without its token), not the cap.
    assert status == 403 and text != REFUSAL
