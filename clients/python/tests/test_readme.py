"""The README's examples run as written, twice in a row, against a real daemon found through
``$DIFFCAST_SOCKET``, and print what the README shows."""

import os
import pathlib
import subprocess
import sys

import diffcast

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def fenced_blocks():
    """(language, text) of every fenced block of the README, in order."""
    found, language, lines = [], None, []
    for line in README.read_text().splitlines(keepends=True):
        if not line.startswith("```"):
            lines.append(line)
        elif language is None:
            language, lines = line[3:].strip(), []
        else:
            found.append((language, "".join(lines)))
            language = None
    return found


def run(code, socket_path):
    environment = dict(os.environ, DIFFCAST_SOCKET=socket_path)
    package_folder = os.path.dirname(os.path.dirname(diffcast.__file__))
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [package_folder, environment.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, "%s\nfailed:\n%s" % (code, result.stderr)
    return result.stdout


def test_the_readme_examples_run_twice_and_print_what_it_shows(daemon):
    examples = [text for language, text in fenced_blocks() if language == "python"]
    shown = [text for language, text in fenced_blocks() if language == ""]
    assert len(examples) >= 3 and len(shown) >= 2 and not any("/run/" in code for code in examples)
    outputs = [[run(code, daemon.socket_path) for code in examples] for _ in range(2)]
    assert outputs[0][0] == shown[0]
    assert outputs[0][2] == outputs[1][2] == shown[1]  # the windowed example: no version printed
    for first, second, *_ in outputs:
        assert [line.split()[0] for line in first.splitlines()] == ["snapshot", "changeset"]
        assert "'disk'" in first.splitlines()[1]
        assert second.startswith("unknown_item") and "ghost" in second
    assert outputs[1][0] != outputs[0][0]  # other versions, same shape: the second run wrote again
