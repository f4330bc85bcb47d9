"""What the browser tests share: a headless Chromium (Debian's chromium and chromium-driver,
driven by Selenium), and the address of the page under test.

The daemon serves the page and the script from its binary (Sources/DiffcastHTTP/WebAssets.swift,
generated from clients/js by scripts/embed-web.py). A daemon built before the last change of
clients/js serves older copies; then the page is opened through `SourcePages`, which serves
clients/js/index.html and clients/js/diffcast.js from this tree and relays every other request
(the API, Server-Sent Events, the WebSocket) to the daemon. DIFFCAST_PAGE=daemon always opens the
daemon's own page (and a stale one fails the tests), DIFFCAST_PAGE=source always the tree's."""

import contextlib
import os
import pathlib
import shutil
import socket
import threading
import urllib.request
import warnings

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent
ASSETS = {
    "/": ("text/html; charset=utf-8", REPOSITORY / "clients" / "js" / "index.html"),
    "/index.html": ("text/html; charset=utf-8", REPOSITORY / "clients" / "js" / "index.html"),
    "/v1/diffcast.js": ("text/javascript; charset=utf-8", REPOSITORY / "clients" / "js" / "diffcast.js"),
}

webdriver = pytest.importorskip("selenium.webdriver")
if not shutil.which("chromedriver") or not shutil.which("chromium"):
    pytest.skip("chromium and chromium-driver are not installed", allow_module_level=True)


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900"):
        options.add_argument(argument)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


class SourcePages:
    """An HTTP front for the daemon on a free loopback port: GET /, /index.html and
    /v1/diffcast.js from clients/js, everything else relayed to the daemon's HTTP port. Every
    relayed request but a WebSocket upgrade goes with `Connection: close`, so that the browser
    never asks for the page or the script on a connection that leads to the daemon."""

    def __init__(self, daemon_port):
        self.target = daemon_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(client,), daemon=True).start()

    def serve(self, client):
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    client.close()
                    return
                head += chunk
            head, rest = head.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            if method == "GET" and target.split("?")[0] in ASSETS:
                kind, path = ASSETS[target.split("?")[0]]
                body = path.read_bytes()
                client.sendall(
                    f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                    "Cache-Control: no-store\r\nConnection: close\r\n\r\n".encode() + body
                )
                client.close()
                return
            upgrade = any(line.lower().startswith("upgrade:") for line in lines[1:])
            if not upgrade:
                lines = [lines[0]] + [
                    line for line in lines[1:] if not line.lower().startswith(("connection:", "keep-alive:"))
                ] + ["Connection: close"]
            upstream = socket.create_connection(("127.0.0.1", self.target))
            upstream.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + rest)
        except OSError:
            client.close()
            return
        threading.Thread(target=self.pipe, args=(client, upstream), daemon=True).start()
        self.pipe(upstream, client)

    @staticmethod
    def pipe(source, destination):
        try:
            while data := source.recv(65536):
                destination.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, destination):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def close(self):
        self.listener.close()


def daemon_serves_this_tree(daemon):
    for path, (_, source) in ASSETS.items():
        with urllib.request.urlopen(daemon.base + path, timeout=10) as response:
            if response.read() != source.read_bytes():
                return False
    return True


@contextlib.contextmanager
def page_origin(daemon):
    """The origin (http://HOST:PORT) to open the page at: the daemon's, when it serves this tree's
    page and script, else a `SourcePages` in front of it (see the module's text)."""
    mode = os.environ.get("DIFFCAST_PAGE", "auto")
    if mode == "daemon" or (mode == "auto" and daemon_serves_this_tree(daemon)):
        yield daemon.base
        return
    if mode == "auto":
        warnings.warn("the daemon serves an older page or script than clients/js (rebuild it after "
                      "scripts/embed-web.py): the page is served from the tree")
    pages = SourcePages(daemon.port)
    try:
        yield pages.base
    finally:
        pages.close()
