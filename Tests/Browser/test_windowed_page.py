"""The inspector page's windowed list in a real headless Chromium: a collection of 100,000 items
is shown as one scroll area as tall as all of it that holds only the rows around what is
visible. Scrolled to the top, far down (rows whose identifiers the page must look up), the end
and back, the rows it shows are, at each place, the daemon's `get` with the window the page
holds, each row at its own height, with the view's digest verified. A write inside the visible
window shows; a write far outside it sends no event. Over Server-Sent Events and WebSocket."""

import json
import pathlib
import sys
import time

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPOSITORY / "clients" / "python"))
sys.path.insert(0, str(REPOSITORY / "Tests" / "HTTP"))

from browsing import browser, page_origin  # noqa: E402,F401 (browser is a fixture)
from conftest import HTTPDaemon  # noqa: E402

ROW_HEIGHT = 28  # the page's ROW_HEIGHT
ITEMS = 100_000
SECTIONS = 4
COLLECTION = "big"

STATE = """
const page = window.diffcastPage, followed = page.followed, binder = page.binder;
if (!followed || !binder || followed.mirror.version === null) return null;
const list = document.querySelector('#list');
const top = list.getBoundingClientRect().top - list.scrollTop;
const rows = [...list.querySelectorAll('li')];
// Rows not at their own place: row r of the collection belongs r * rowHeight below the top.
const misplaced = rows.filter(li => Math.abs(li.getBoundingClientRect().top - top - Number(li.dataset.row) * arguments[0]) > 0.5)
  .map(li => [li.dataset.id, li.dataset.row, li.getBoundingClientRect().top - top]);
return {settled: binder.settled, window: followed.window, meta: followed.mirror.window,
        version: followed.mirror.version, digest: followed.mirror.digest, visible: binder.visible(),
        items: rows.map(li => [li.dataset.id, li.querySelector('code').textContent]),
        sections: [...list.querySelectorAll('section')].map(s => s.dataset.id),
        misplaced, scrollHeight: list.scrollHeight, divergences: page.divergences, chain: page.chain,
        status: document.querySelector('#status').textContent, moves: binder.moves};
"""


def page_state(browser):
    return browser.execute_script(STATE, ROW_HEIGHT)


def wait_until(browser, condition, what, timeout=20):
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = page_state(browser)
        if state and condition(state):
            return state
        time.sleep(0.02)
    raise AssertionError(f"the page did not {what} within {timeout} s: {summary(state)}")


def summary(state):
    if not state:
        return state
    return {key: value for key, value in state.items() if key not in ("items", "chain")} | {
        "items": state["items"][:3], "chain": state["chain"][-5:]}


def at_rest(state):
    """The list holds the visible rows, and the status line names them: it follows the scroll
    event, which the browser dispatches a frame after the scroll, so it may lag a moment."""
    visible = state["visible"]
    return state["settled"] and f"rows {visible['first'] + 1}–{visible['last']} of {visible['total']}" in state["status"]


def settled(browser, what):
    return wait_until(browser, at_rest, what)


def fill(daemon):
    per_section = ITEMS // SECTIONS
    sections = [
        {"id": f"s{k}", "data": {"k": k},
         "items": [{"id": f"r{n}", "data": {"n": n}} for n in range(k * per_section, (k + 1) * per_section)]}
        for k in range(SECTIONS)
    ]
    with daemon.client() as client:
        return client.request("apply", COLLECTION, sections=sections)["version"]


def window_get(daemon, window):
    with daemon.client() as client:
        return client.request("get", COLLECTION, window=window)


def data_text(item):
    if isinstance(item, str) or item.get("data") is None:
        return ""
    return json.dumps(item["data"], separators=(",", ":"), ensure_ascii=False)


def check_view(daemon, state, where):
    """The rows shown are `get` with the page's window; they cover what is visible, each at its
    place; the view's digest was verified."""
    answer = window_get(daemon, state["window"])
    expected = [[item if isinstance(item, str) else item["id"], data_text(item)]
                for section in answer["sections"] for item in section["items"]]
    assert state["version"] == answer["version"], where
    assert state["items"] == expected, f"{where}: {state['items'][:3]}… vs {expected[:3]}…"
    assert state["sections"] == [section["id"] for section in answer["sections"]], where
    assert state["meta"] == answer["window"], where
    assert state["digest"] == answer["digest"], where
    assert state["divergences"] == 0 and "digest verified" in state["status"], (where, state["status"])
    assert not state["misplaced"], (where, state["misplaced"][:5])
    visible, meta = state["visible"], state["meta"]
    assert meta["offset"] <= visible["first"] and visible["last"] <= meta["offset"] + meta["count"], (where, visible, meta)
    assert visible["last"] > visible["first"], where
    # The status names the rows on screen, not the rows the window holds.
    shown = f"rows {visible['first'] + 1}–{visible['last']} of {visible['total']}"
    assert shown in state["status"], (where, state["status"], visible)
    assert state["scrollHeight"] >= meta["total"] * ROW_HEIGHT, where
    return answer


def scroll_to(browser, row):
    browser.execute_script("const list = document.querySelector('#list'); list.scrollTop = arguments[0];", row * ROW_HEIGHT)


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_a_windowed_list_of_100000_items_follows_the_scroll(browser, transport):
    with HTTPDaemon() as daemon, page_origin(daemon) as origin:
        fill(daemon)
        browser.get(f"{origin}/#collection={COLLECTION}&transport={transport}&window=1")
        state = settled(browser, "show the top")
        answer = check_view(daemon, state, "the top")
        assert state["window"].keys() == {"first"} and answer["window"]["offset"] == 0
        assert len(state["items"]) < 500, "the page holds only the rows around what is visible"

        # Far down (rows the page looks up), the end, and back; then near a place it has been.
        for row in (3_000, 50_000, ITEMS, 75_000, 50_040, 0, 62_500):
            scroll_to(browser, row)
            state = settled(browser, f"show row {row}")
            check_view(daemon, state, f"row {row}")
            if row == ITEMS:
                assert "last" in state["window"], state["window"]
            elif row not in (0,):
                assert "anchor" in state["window"], state["window"]
                first = state["visible"]["first"]
                assert state["items"][first - state["meta"]["offset"]][0] == state["window"]["anchor"]

        # Scrolled in small steps, as a wheel does, without waiting: the moves keep up.
        moves = state["moves"]
        for step in range(1, 41):
            scroll_to(browser, 62_500 + 9 * step)
        state = settled(browser, "follow small steps")
        check_view(daemon, state, "small steps")
        assert state["visible"]["first"] == 62_860 and state["moves"] > moves

        # A write inside the visible window shows.
        first = state["visible"]["first"]
        shown = state["items"][first - state["meta"]["offset"]][0]
        with daemon.client() as client:
            version = client.request("update_items", COLLECTION, items=[{"id": shown, "data": {"n": "changed"}}])["version"]
        state = wait_until(browser, lambda s: s["version"] == version and at_rest(s), "show a write in its window")
        check_view(daemon, state, "a write inside the window")
        assert [shown, '{"n":"changed"}'] in state["items"]

        # A write far outside sends no event: the next event, for a write inside, goes from the
        # version before the far write to the version of the write inside.
        before, events = state["version"], len(state["chain"])
        with daemon.client() as client:
            far = client.request("update_items", COLLECTION, items=[{"id": "r10", "data": {"n": "far"}}])["version"]
            near = client.request("update_items", COLLECTION, items=[{"id": shown, "data": {"n": "near"}}])["version"]
        assert before < far < near
        state = wait_until(browser, lambda s: s["version"] == near and at_rest(s), "show the write inside")
        assert state["chain"][events:] == [["changeset", before, near]], state["chain"][events:]
        check_view(daemon, state, "after a far write")

        # Rows inserted just above the screen keep it on the same rows.
        first = state["visible"]["first"]
        shown = state["items"][first - state["meta"]["offset"]][0]
        above = state["items"][first - state["meta"]["offset"] - 5][0]
        with daemon.client() as client:
            version = client.request("insert_items", COLLECTION, items=["up1", "up2", "up3"], before=above)["version"]
        state = wait_until(browser, lambda s: s["version"] == version and at_rest(s), "show rows inserted above")
        check_view(daemon, state, "rows inserted above")
        assert state["items"][state["visible"]["first"] - state["meta"]["offset"]][0] == shown, state["visible"]

        # At the end (a `last` window), an appended item shows as the last row.
        scroll_to(browser, ITEMS)
        state = settled(browser, "show the end again")
        check_view(daemon, state, "the end")
        with daemon.client() as client:
            version = client.request("append_items", COLLECTION, section=f"s{SECTIONS - 1}", items=[{"id": "new", "data": {"n": "new"}}])["version"]
        state = wait_until(browser, lambda s: s["version"] == version and at_rest(s), "show an appended item")
        assert state["items"][-1] == ["new", '{"n":"new"}'], state["items"][-3:]
        check_view(daemon, state, "an appended item")
        assert state["meta"]["total"] == ITEMS + 4


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_a_windowed_page_subscribes_again_with_its_window_after_a_restart(browser, transport, tmp_path):
    """After the daemon restarts, the page subscribes again with its window at the anchor the
    daemon last reported (a snapshot of the view; a windowed stream never resumes with since),
    here after its first anchor was deleted and the anchor passed to the next item."""
    with HTTPDaemon(["--state-dir", str(tmp_path / "state")]) as daemon, page_origin(daemon) as origin:
        with daemon.client() as client:
            client.request("apply", COLLECTION, sections=[{"id": "s", "items": [f"r{n}" for n in range(2000)]}])
        browser.get(f"{origin}/#collection={COLLECTION}&transport={transport}&window=1")
        settled(browser, "show the top")
        scroll_to(browser, 1000)
        state = settled(browser, "show row 1000")
        assert state["window"]["anchor"] == "r1000"
        with daemon.client() as client:
            version = client.request("delete_items", COLLECTION, items=["r1000"])["version"]
        state = wait_until(browser, lambda s: s["version"] == version, "see the anchor deleted")
        assert state["window"]["anchor"] == "r1001" and state["meta"]["anchor"] == "r1001"
        events = len(state["chain"])
        daemon.restart()
        with daemon.client() as client:
            version = client.request("update_items", COLLECTION, items=[{"id": "r1001", "data": {"n": "after"}}])["version"]
        state = wait_until(browser, lambda s: s["version"] == version and at_rest(s), "follow again after the restart")
        # The first event after the restart is a snapshot (of the view at its anchor), whether
        # the page came back before the write or after it.
        assert state["chain"][events][0] == "snapshot", state["chain"][events:]
        assert ["r1001", '{"n":"after"}'] in state["items"]
        assert state["window"] == {"anchor": "r1001", "before": state["window"]["before"], "after": state["window"]["after"]}
        check_view(daemon, state, "after the restart")
