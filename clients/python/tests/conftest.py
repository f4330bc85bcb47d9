import os
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
REPOSITORY = HERE.parent.parent.parent

from diffcast.testing import Daemon  # noqa: E402


def daemon_binary():
    return os.environ.get("DIFFCASTD") or str(REPOSITORY / ".build" / "debug" / "diffcastd")


@pytest.fixture
def daemon():
    with Daemon(daemon_binary()) as running:
        yield running
