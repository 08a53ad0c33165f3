import os

import pytest

from artifactflow import realtime
from tests.processes import LayerListener

# Outside a transaction, as a worker sends: at once, not at a test transaction's end.
pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def layer_directory(settings, tmp_path):
    directory = tmp_path.parent / f"rt-{os.getpid()}"
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "live.layer.LocalSocketLayer", "CONFIG": {"directory": directory}}
    }
    realtime.publisher_reset()
    yield directory
    realtime.publisher_reset()


def test_a_forked_child_announces_on_a_publisher_of_its_own(layer_directory):
    listener = LayerListener(layer_directory)
    try:
        # The parent's publisher runs, as a django-q2 cluster's may before it forks its workers.
        realtime.group_send_on_commit(group="conversation-1", type=realtime.RUN_EVENT, seq=1)
        assert listener.next() == {"type": realtime.RUN_EVENT, "seq": 1}

        child = os.fork()
        if child == 0:
            realtime.group_send_on_commit(group="conversation-1", type=realtime.RUN_EVENT, seq=2)
            realtime.publisher_reset()
            os._exit(0)
        os.waitpid(child, 0)

        assert listener.next() == {"type": realtime.RUN_EVENT, "seq": 2}
    finally:
        listener.kill()
