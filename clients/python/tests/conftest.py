import os
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPOSITORY = HERE.parent.parent.parent
try:  # the installed package (make test installs it with pip first), else the source tree
    import diffcast  # noqa: F401
except ImportError:
    sys.path.insert(0, str(HERE.parent))

from diffcast.testing import Daemon  # noqa: E402


def daemon_binary():
    return os.environ.get("DIFFCASTD") or str(REPOSITORY / ".build" / "debug" / "diffcastd")


@pytest.fixture
def daemon():
    with Daemon(daemon_binary()) as running:
        yield running
