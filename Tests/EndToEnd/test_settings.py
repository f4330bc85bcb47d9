"""Each setting is one name in three places a user meets it: the key of config/diffcastd.yaml
(whose values are the embedded defaults, DaemonSettingsTests), the `--option` of
`diffcastd --help`, and what a file or an option sets, which the daemon then reports."""

import re
import subprocess

from conftest import REPOSITORY, binary

# Options that are not settings: what to read, check or print instead of serving.
NOT_SETTINGS = {"config", "check-config", "verify-state", "version", "help"}


def shipped_keys():
    text = (REPOSITORY / "config" / "diffcastd.yaml").read_text()
    return re.findall(r"^([a-z_]+):", text, flags=re.MULTILINE)


def options():
    help_text = subprocess.run([binary("diffcastd"), "--help"], capture_output=True, text=True, timeout=30).stdout
    return set(re.findall(r"^\s+--([a-z-]+)", help_text, flags=re.MULTILINE))


def test_every_key_of_the_file_is_an_option_and_every_option_a_key():
    keys = shipped_keys()
    assert len(keys) == len(set(keys)) and len(keys) > 40, keys
    named = {key.replace("_", "-") for key in keys}
    offered = options() - NOT_SETTINGS
    assert sorted(named - offered) == [], "keys with no --option"
    assert sorted(offered - named) == [], "options with no key in config/diffcastd.yaml"


def test_an_option_and_the_files_key_are_the_same_setting(tmp_path):
    # The same bad value, by the key and by the option: the same refusal, naming the key.
    config = tmp_path / "d.yaml"
    config.write_text("stream_linger_ms: 5000\n")
    by_file = subprocess.run([binary("diffcastd"), "--check-config", str(config)],
                             capture_output=True, text=True, timeout=30)
    assert by_file.returncode != 0 and "stream_linger_ms: 0 to 1000, got 5000" in by_file.stdout + by_file.stderr
    by_option = subprocess.run([binary("diffcastd"), "--socket", str(tmp_path / "d.sock"), "--stream-linger-ms", "5000"],
                               capture_output=True, text=True, timeout=30)
    assert by_option.returncode != 0 and "stream_linger_ms: 0 to 1000, got 5000" in by_option.stderr
