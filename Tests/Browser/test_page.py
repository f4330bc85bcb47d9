"""The inspector page in a real headless Chromium (Debian's chromium and chromium-driver,
driven by Selenium): it follows a collection through random writes of every op, over
Server-Sent Events and over WebSocket; at checked versions the DOM (ids in order, rendered data)
equals `get`, and no digest check failed. A daemon restart mid-stream is resumed with no gap and
no snapshot; a screenshot of the page is kept in .build/artifacts. The page is this tree's
(browsing.page_origin)."""

import json
import pathlib
import random
import sys
import time

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPOSITORY / "clients" / "python"))
sys.path.insert(0, str(REPOSITORY / "Tests" / "HTTP"))

from browsing import browser, page_origin  # noqa: E402,F401 (browser is a fixture)
from conftest import HTTPDaemon  # noqa: E402

ARTIFACTS = REPOSITORY / ".build" / "artifacts"


def page_state(browser):
    return browser.execute_script(
        """
        const page = window.diffcastPage;
        const items = [...document.querySelectorAll('#list li')].map(li => [li.dataset.id, li.querySelector('code').textContent]);
        const sections = [...document.querySelectorAll('#list section')].map(s => s.dataset.id);
        const sidebar = Object.fromEntries([...document.querySelectorAll('#collections a')]
            .map(a => [a.dataset.name, a.querySelector('small').textContent]));
        return {version: page.lastVersion, divergences: page.divergences, kinds: page.kinds, items, sections,
                status: document.querySelector('#status').textContent, sidebar};
        """
    )


def wait_for_version(browser, version, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = page_state(browser)
        if state["version"] == version:
            return state
        time.sleep(0.05)
    raise AssertionError(f"the page did not reach version {version}: {page_state(browser)}")


def expected(daemon, collection):
    with daemon.client() as client:
        state = client.get(collection)
    items = [
        [item, ""] if isinstance(item, str) else [item["id"], json.dumps(item.get("data"), separators=(",", ":"), ensure_ascii=False) if item.get("data") is not None else ""]
        for section in state["sections"] for item in section["items"]
    ]
    return state["version"], items, [section["id"] for section in state["sections"]]


def random_writes(client, collection, count, rng):
    """`count` random writes of every op, five at a time (so that they make many versions),
    weighted so that the collection keeps a few dozen items in four sections."""
    answers = []
    for start in range(0, count, 5):
        batch = []
        for step in range(start, min(start + 5, count)):
            item, other, section = f"i{rng.randrange(60)}", f"i{rng.randrange(60)}", f"s{rng.randrange(4)}"
            choices = [
                (10, {"op": "append_sections", "sections": [{"id": section}]}),
                (30, {"op": "append_items", "section": section, "items": [{"id": item, "data": {"n": step, "t": "é \"q\""}}]}),
                (10, {"op": "insert_items", "items": [item], "before": other}),
                (10, {"op": "delete_items", "items": [item]}),
                (15, {"op": "move_item", "item": item, "after": other}),
                (15, {"op": "update_items", "items": [{"id": item, "data": {"n": step}}]}),
                (4, {"op": "reload_items", "items": [item]}),
                (5, {"op": "move_section", "section": section, "before": f"s{rng.randrange(4)}"}),
                (1, {"op": "delete_sections", "sections": [section]}),
            ]
            request = rng.choices([c[1] for c in choices], weights=[c[0] for c in choices])[0]
            batch.append(request | {"collection": collection})
        answers += client.pipeline(batch)
    return answers


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_the_page_follows_every_op_and_a_restart(browser, transport, tmp_path):
    collection = f"page-{transport}"
    with HTTPDaemon(["--state-dir", str(tmp_path / "state")]) as daemon, page_origin(daemon) as origin:
        with daemon.client() as client:
            client.request("apply", collection, sections=[{"id": "s0", "items": ["i0"]}, {"id": "s1"}])
        browser.get(f"{origin}/#collection={collection}&transport={transport}")
        wait_for_version(browser, 1)
        rng = random.Random({"sse": 1, "websocket": 2}[transport])
        checked = took_effect = most_items = 0
        for round_number in range(10):
            with daemon.client() as client:
                answers = random_writes(client, collection, 100, rng)
            took_effect += sum(answer["ok"] for answer in answers)
            version, items, sections = expected(daemon, collection)
            state = wait_for_version(browser, version)
            assert state["items"] == items, f"round {round_number}"
            assert state["sections"] == sections, f"round {round_number}"
            assert state["divergences"] == 0
            # The sidebar's line agrees with the header, however its own list lags.
            assert state["sidebar"].get(collection, "").startswith(f"v{version} ·"), (state["sidebar"], version)
            checked += 1
            most_items = max(most_items, len(items))
            if round_number == 4:
                # A restart in mid-stream: the page resumes from the version it holds.
                kinds_before = len(state["kinds"])
                daemon.restart()
                with daemon.client() as client:
                    random_writes(client, collection, 20, rng)
                version, items, _ = expected(daemon, collection)
                state = wait_for_version(browser, version)
                assert state["items"] == items
                assert "snapshot" not in state["kinds"][kinds_before:], state["kinds"][kinds_before:]
        final = page_state(browser)
        assert checked == 10 and took_effect > 300 and "verified" in final["status"]
        assert final["kinds"].count("changeset") > 100 and most_items > 10, final
        time.sleep(0.5)  # the last animations settle
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / f"page-{transport}.png"))


class DamagingProxy:
    """Relays HTTP between the browser and the daemon; once armed, flips a digit of the digest
    of the next changeset it passes (what a flipped byte on the way looks like to a page)."""

    def __init__(self, port):
        import socket
        import threading

        self.target = port
        self.armed = threading.Event()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self.pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self.pipe, args=(upstream, client, True), daemon=True).start()

    def pipe(self, source, destination, damaging):
        try:
            while data := source.recv(65536):
                marker = b'"event":"changeset"'
                if damaging and self.armed.is_set() and marker in data:
                    at = data.index(b'"digest":"', data.index(marker)) + len(b'"digest":"')
                    data = data[:at] + (b"1" if data[at:at + 1] != b"1" else b"2") + data[at + 1:]
                    self.armed.clear()
                destination.sendall(data)
        except OSError:
            pass
        finally:
            destination.close()

    def close(self):
        self.listener.close()


def test_a_damaged_event_is_reported_and_the_page_subscribes_again(browser):
    with HTTPDaemon() as daemon, page_origin(daemon) as origin:
        proxy = DamagingProxy(int(origin.rsplit(":", 1)[1]))
        with daemon.client() as client:
            client.request("apply", "damaged", sections=[{"id": "s", "items": ["a", "b"]}])
        browser.get(f"http://127.0.0.1:{proxy.port}/#collection=damaged")
        wait_for_version(browser, 1)
        proxy.armed.set()
        with daemon.client() as client:
            client.request("append_items", "damaged", items=["c"])
            client.request("append_items", "damaged", items=["d"])
        version, items, _ = expected(daemon, "damaged")
        state = wait_for_version(browser, version)
        assert state["divergences"] == 1
        assert state["items"] == items
        assert state["kinds"].count("snapshot") == 2, state["kinds"]
        proxy.close()
