"""Diffcast deployed as a team would: Debian's nginx-light terminating TLS (a self-signed
certificate) with config/nginx/diffcast.conf in front of the daemon, which verifies capability
tokens; headless Chromium opens the page over https and follows alice's inbox over https
Server-Sent Events and wss WebSocket with alice's token, and is refused bob's. Tokens are minted
here with PyJWT, not by the daemon."""

import base64
import importlib.util
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPOSITORY / "clients" / "python"))

jwt = pytest.importorskip("jwt")
webdriver = pytest.importorskip("selenium.webdriver")

# Tests/HTTP's harness under a name of its own: another folder's conftest may be `conftest` here.
_spec = importlib.util.spec_from_file_location("http_support", REPOSITORY / "Tests" / "HTTP" / "conftest.py")
http_support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(http_support)
HTTPDaemon, free_port = http_support.HTTPDaemon, http_support.free_port

if not shutil.which("nginx") and not os.path.exists("/usr/sbin/nginx"):
    pytest.skip("nginx-light is not installed", allow_module_level=True)
if not shutil.which("chromedriver") or not shutil.which("chromium"):
    pytest.skip("chromium and chromium-driver are not installed", allow_module_level=True)

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SECRET = bytes(range(1, 33))


def mint(sub, read=(), write=(), seconds=600):
    claims = {"sub": sub, "exp": int(time.time()) + seconds, "diffcast": {"read": list(read), "write": list(write)}}
    return jwt.encode(claims, SECRET, algorithm="HS256", headers={"kid": "team"})


def wait_for_port(port, what, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{what} did not open port {port}")


@pytest.fixture
def deployment(tmp_path):
    """The daemon (--http on loopback, --auth-keys, nginx as its trusted proxy) behind nginx on
    https://127.0.0.1:PORT, with the shipped site configuration adapted to the test's ports."""
    keys = tmp_path / "keys.json"
    k = base64.urlsafe_b64encode(SECRET).rstrip(b"=").decode()
    keys.write_text(json.dumps({"keys": [{"kty": "oct", "kid": "team", "alg": "HS256", "k": k}]}))
    daemon = HTTPDaemon(["--auth-keys", str(keys), "--trusted-proxies", "127.0.0.1"]).start()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
        check=True, capture_output=True)
    port = free_port()
    site = (REPOSITORY / "config" / "nginx" / "diffcast.conf").read_text()
    site = site.replace("server 127.0.0.1:8080;", f"server 127.0.0.1:{daemon.port};")
    site = site.replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
    site = site.replace("/etc/ssl/certs/diffcast.pem", str(tmp_path / "cert.pem"))
    site = site.replace("/etc/ssl/private/diffcast.key", str(tmp_path / "key.pem"))
    site = site.replace("/var/log/nginx/diffcast.log", str(tmp_path / "access.log"))
    assert site.count(str(tmp_path)) == 3 and f"127.0.0.1:{daemon.port}" in site
    for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp_path / name).mkdir()
    temp_paths = "\n".join(f"    {name}_temp_path {tmp_path / name};" for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    temp_paths = temp_paths.replace("client_body_temp_path " + str(tmp_path / "client_body"), "client_body_temp_path " + str(tmp_path / "body"))
    (tmp_path / "nginx.conf").write_text(
        f"""
daemon off;
worker_processes 1;
pid {tmp_path / "nginx.pid"};
error_log {tmp_path / "error.log"};
{"user root;" if os.getuid() == 0 else ""}
events {{ worker_connections 256; }}
http {{
{temp_paths}
    access_log off;
{site}
}}
""")
    if os.getuid() == 0:
        # nginx-light creates its compiled-in temporary folders before reading the configuration.
        for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(f"/var/lib/nginx/{name}", exist_ok=True)
    nginx = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        try:
            wait_for_port(port, "nginx")
        except AssertionError:
            nginx.kill()
            raise AssertionError(f"nginx did not start: {nginx.stderr.read().decode()[-2000:]}") from None
        yield daemon, port, tmp_path
    finally:
        nginx.send_signal(signal.SIGQUIT)
        try:
            nginx.wait(timeout=10)
        except subprocess.TimeoutExpired:
            nginx.kill()
        daemon.stop()


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--ignore-certificate-errors"):
        options.add_argument(argument)
    options.set_capability("acceptInsecureCerts", True)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


FOLLOW = """
const [transport, token, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
import("/v1/diffcast.js").then(({ follow }) => {
  const updates = [];
  const url = transport === "websocket"
    ? `wss://${location.host}/v1/ws`
    : `https://${location.host}/v1/collections/inbox.alice/events`;
  const followed = follow(url, {
    transport, collection: "inbox.alice", token,
    onChange: (update, mirror) => updates.push([update.kind, mirror.version, mirror.digest]),
    onError: (error) => (window.followError = { code: error.code, message: error.message }),
  });
  window.followed = followed;
  window.updates = updates;
  done(true);
}, (error) => done(String(error)));
"""


def wait_until(browser, script, what, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = browser.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: {browser.execute_script('return [window.updates, window.followError]')}")


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_a_page_behind_nginx_follows_its_own_inbox_over_tls_and_is_refused_another(deployment, browser, transport):
    daemon, port, folder = deployment
    with daemon.client() as owner:
        owner.request("apply", "inbox.alice", sections=[{"id": "mail", "items": ["m1"]}])
        owner.request("apply", "inbox.bob", sections=[{"id": "mail", "items": ["b1"]}])
        browser.get(f"https://127.0.0.1:{port}/")
        assert browser.execute_async_script(FOLLOW, transport, mint("alice", read=["inbox.alice"])) is True
        wait_until(browser, "return window.followed.mirror.version === 1", "alice's snapshot over TLS")
        for k in range(2, 6):
            owner.request("append_items", "inbox.alice", items=[f"m{k}"])
        state = owner.get("inbox.alice")
        wait_until(browser, f"return window.followed.mirror.version === {state['version']}", "every version through nginx")
        assert browser.execute_script("return window.followed.mirror.digest") == state["digest"]
        kinds = browser.execute_script("return window.updates.map(u => u[0])")
        assert kinds == ["snapshot"] + ["changeset"] * (state["version"] - 1), kinds
        browser.execute_script("window.followed.close(); window.followError = null;")

        # Bob's token does not open alice's inbox: the page is told why.
        assert browser.execute_async_script(FOLLOW, transport, mint("bob", read=["inbox.bob"])) is True
        error = wait_until(browser, "return window.followError", "bob refused")
        assert error["code"] == "unauthorized" and "inbox.alice" in error["message"], error
        assert browser.execute_script("return window.updates.length") == 0

    # The proxy's access log never holds a token, though EventSource carries one in its URL.
    log = (folder / "access.log").read_text()
    assert "/v1/" in log and "token" not in log and not re.search(r"eyJ[\w-]+\.", log), log
