"""Contract 4, scoped access, as a client meets it: the real diffcastd with --auth-keys, driven
over its Unix socket, TCP, HTTP, Server-Sent Events and WebSocket with JWTs minted here.

Every expectation comes from shared/SPEC.md ("Access", "Events", "Scoped access (contract 4)").
The test modules import the helpers as `access_support` (this file under a name of its own, so
that running Tests/Access beside another folder's conftest.py cannot mix the two up).

Needs PyJWT, cryptography and websocket-client:
    python3 -m pip install -q pyjwt cryptography websocket-client
"""

import base64
import collections
import hashlib
import hmac
import itertools
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

try:
    import jwt  # PyJWT
    import websocket  # websocket-client
    from cryptography.hazmat.primitives import serialization
except ImportError as error:  # a missing package fails the run, it never skips it
    raise ImportError(f"{error}: python3 -m pip install -q pyjwt cryptography websocket-client") from error

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: E402
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm  # noqa: E402

sys.modules.setdefault("access_support", sys.modules[__name__])

REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent

#: Seconds any single wait of these tests may take before it counts as a failure.
WAIT = 5.0


def binary():
    return os.environ.get("DIFFCASTD") or str(REPOSITORY / ".build" / "debug" / "diffcastd")


def free_ports(count):
    """`count` free loopback ports, all different: each probe stays bound until every port is
    chosen (two probes bound one after the other may be given the same port)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# MARK: - Keys and tokens


class Key:
    """A signing key, its algorithm, its kid, and its public JWK (what goes in the key set)."""

    def __init__(self, alg, kid, signing, jwk):
        self.alg = alg
        self.kid = kid
        self.signing = signing
        self.jwk = dict(jwk, kid=kid, alg=alg, use="sig")

    def __repr__(self):
        return f"Key({self.alg}, {self.kid})"

    @property
    def public_pem(self):
        """The public key as PEM bytes (RSA, EC, Ed25519)."""
        return self.signing.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def hs256_key(kid):
    secret = os.urandom(32)
    return Key("HS256", kid, secret, {"kty": "oct", "k": b64url(secret)})


def rs256_key(kid):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return Key("RS256", kid, private, RSAAlgorithm.to_jwk(private.public_key(), as_dict=True))


def es256_key(kid):
    private = ec.generate_private_key(ec.SECP256R1())
    return Key("ES256", kid, private, ECAlgorithm.to_jwk(private.public_key(), as_dict=True))


def eddsa_key(kid):
    private = ed25519.Ed25519PrivateKey.generate()
    jwk = OKPAlgorithm.to_jwk(private.public_key(), as_dict=True)
    assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519"
    return Key("EdDSA", kid, private, jwk)


def write_jwks(path, keys):
    """The key set file (RFC 7517), written whole and then moved into place."""
    path = pathlib.Path(path)
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps({"keys": [key.jwk for key in keys]}, indent=1))
    os.replace(scratch, path)
    return path


_KEEP = object()


def mint(key, alg=None, sub="alice", read=(), write=(), drop=(), admin=False, exp_in=60, kid=_KEEP,
         rights=_KEEP, headers=None, **claims):
    """A JWT signed with `key`: `sub`, `exp` `exp_in` seconds from now (None: no exp), `iat`, and
    the `diffcast` claim from read/write/drop/admin (or `rights` as given). `kid` defaults to the
    key's (None: no kid). Further claims are added; a claim given as None is left out."""
    now = int(time.time())
    if rights is _KEEP:
        rights = {"read": list(read), "write": list(write), "drop": list(drop)}
        if admin:
            rights["admin"] = True
    payload = {"sub": sub, "iat": now, "diffcast": rights}
    if exp_in is not None:
        payload["exp"] = now + exp_in
    payload.update(claims)
    payload = {name: value for name, value in payload.items() if value is not None}
    header = dict(headers or {})
    kid = key.kid if kid is _KEEP else kid
    if kid is not None:
        header["kid"] = kid
    return jwt.encode(payload, key.signing, algorithm=alg or key.alg, headers=header or None)


def forge(header, payload, signature=b""):
    """A compact JWS put together by hand (for tokens no library will sign)."""
    head = b64url(json.dumps(header, separators=(",", ":")).encode())
    body = b64url(json.dumps(payload, separators=(",", ":")).encode())
    return f"{head}.{body}.{b64url(signature)}"


def hmac_forge(header, payload, secret):
    """An HS256 token over `header`.`payload` with `secret` (any bytes) as the HMAC key."""
    unsigned = forge(header, payload).rsplit(".", 1)[0]
    signature = hmac.new(secret, unsigned.encode(), hashlib.sha256).digest()
    return f"{unsigned}.{b64url(signature)}"


def claims(sub="alice", read=(), write=(), drop=(), exp_in=60, **more):
    now = int(time.time())
    payload = {"sub": sub, "iat": now, "exp": now + exp_in,
               "diffcast": {"read": list(read), "write": list(write), "drop": list(drop)}}
    payload.update(more)
    return payload


@pytest.fixture(scope="session")
def keys():
    """The keys of the main key set (hs, rs, rs2, es, ed) and one that is in no set (rogue)."""
    return {
        "hs": hs256_key("hs-1"),
        "rs": rs256_key("rs-1"),
        "rs2": rs256_key("rs-2"),
        "es": es256_key("es-1"),
        "ed": eddsa_key("ed-1"),
        "rogue": rs256_key("rs-1"),  # the kid of a key in the set, another key
    }


# MARK: - The daemon


class AccessDaemon:
    """diffcastd on a Unix socket in a temporary folder, with --tcp and --http on free loopback
    ports (when asked) and the given arguments."""

    def __init__(self, arguments=(), tcp=True, http=True, directory=None):
        self.directory = directory or tempfile.mkdtemp(prefix="diffcast-access-")
        self.socket_path = os.path.join(self.directory, "d.sock")
        self.log_path = os.path.join(self.directory, "daemon.log")
        self.given_arguments = list(arguments)
        self.tcp, self.http = tcp, http
        self.choose_ports()
        self.process = None

    def choose_ports(self):
        """Free ports for the listeners asked for, and the arguments that name them."""
        tcp_port, port = free_ports(2)
        self.tcp_port = tcp_port if self.tcp else None
        self.port = port if self.http else None
        self.arguments = list(self.given_arguments)
        if self.tcp:
            self.arguments += ["--tcp", f"127.0.0.1:{self.tcp_port}"]
        if self.http:
            self.arguments += ["--http", f"127.0.0.1:{self.port}"]

    def start(self, attempts=3):
        """Starts the daemon and waits until every listener answers. A port another process took
        between its choice and the daemon's bind is chosen again, up to `attempts` times."""
        log_start = len(self.log())
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([binary(), "--socket", self.socket_path, *self.arguments],
                                            stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 10
        while True:
            if self.process.poll() is not None:
                taken = "address already in use" in self.log()[log_start:]
                if taken and attempts > 1 and (self.tcp or self.http):
                    self.choose_ports()
                    return self.start(attempts - 1)
                raise RuntimeError(f"diffcastd exited with {self.process.returncode}: {self.log()[-2000:]}")
            if self._up():
                return self
            if time.monotonic() > deadline:
                raise TimeoutError(f"diffcastd did not come up: {self.log()[-2000:]}")
            time.sleep(0.02)

    def _up(self):
        endpoints = [(socket.AF_UNIX, self.socket_path)]
        if self.tcp_port:
            endpoints.append((socket.AF_INET, ("127.0.0.1", self.tcp_port)))
        if self.port:
            endpoints.append((socket.AF_INET, ("127.0.0.1", self.port)))
        for family, address in endpoints:
            probe = socket.socket(family, socket.SOCK_STREAM)
            probe.settimeout(1)
            try:
                probe.connect(address)
            except OSError:
                return False
            finally:
                probe.close()
        return True

    def alive(self):
        return self.process.poll() is None

    def signal(self, number):
        self.process.send_signal(number)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as file:
                return file.read()
        except OSError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    # MARK: Clients

    def owner(self):
        """A Unix-socket connection that sent no `auth`: judged by its credentials (the owner)."""
        return LineConnection.unix(self.socket_path)

    def connect(self, transport, token=None, query_token=None):
        """A protocol connection (unix, tcp or ws); with `token`, authenticated by an `auth`
        request that must succeed; `query_token` goes into the WebSocket's URL."""
        if transport == "unix":
            connection = LineConnection.unix(self.socket_path)
        elif transport == "tcp":
            connection = LineConnection.tcp(self.tcp_port)
        elif transport == "ws":
            connection = WebSocketConnection(self, query_token)
        else:
            raise ValueError(transport)
        if token is not None:
            answer = connection.request({"op": "auth", "token": token})
            assert answer["ok"] is True and answer["op"] == "auth", answer
        return connection

    def call(self, method, path, body=None, token=None, query_token=None, headers=None):
        """(status, headers, parsed JSON or text) of one HTTP request; `token` as a Bearer
        header, `query_token` as ?token=."""
        if query_token is not None:
            path += ("&" if "?" in path else "?") + "token=" + urllib.parse.quote(query_token, safe="")
        headers = dict(headers or {})
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=WAIT) as response:
                status, answer_headers, raw = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            status, answer_headers, raw = error.code, error.headers, error.read()
        text = raw.decode(errors="replace")
        try:
            return status, answer_headers, json.loads(text)
        except ValueError:
            return status, answer_headers, text

    def lines(self, text, token=None):
        """POST /v1/requests: (status, the answers line by line)."""
        status, _, answer = self.call("POST", "/v1/requests", text.encode(), token=token)
        if isinstance(answer, dict):
            return status, [answer]
        return status, [json.loads(line) for line in answer.splitlines() if line.strip()]

    def events(self, name, token=None, query_token=None, query="", headers=()):
        """GET /v1/collections/NAME/events as an EventSource would."""
        path = f"/v1/collections/{name}/events"
        params = [query] if query else []
        if query_token is not None:
            params.append("token=" + urllib.parse.quote(query_token, safe=""))
        if params:
            path += "?" + "&".join(params)
        headers = list(headers)
        if token is not None:
            headers.append(f"Authorization: Bearer {token}")
        return EventStream(self.port, path, headers)

    # MARK: The truth, as the owner sees it

    def state(self, name):
        """(version, digest) of a collection, or None when it does not exist."""
        with self.owner() as owner:
            answer = owner.request({"op": "get", "collection": name})
        if not answer["ok"]:
            assert answer["error"]["code"] == "unknown_collection", answer
            return None
        return answer["version"], answer["digest"]

    def seed(self, name, sections=None):
        """Creates (or replaces) a collection as the owner: s1 [a, b], s2 [c] by default."""
        sections = sections if sections is not None else [{"id": "s1", "items": ["a", "b"]},
                                                           {"id": "s2", "items": ["c"]}]
        with self.owner() as owner:
            answer = owner.request({"op": "apply", "collection": name, "sections": sections})
        assert answer["ok"], answer
        return answer["version"]

    def write(self, name, request):
        with self.owner() as owner:
            answer = owner.request(dict(request, collection=name))
        assert answer["ok"], answer
        return answer["version"]

    def names(self):
        with self.owner() as owner:
            answer = owner.request({"op": "list"})
        assert answer["ok"], answer
        return {entry["name"] for entry in answer["collections"]}


# MARK: - Connections


class LineConnection:
    """One protocol connection: requests in, responses and events out (events that arrive
    while a response is awaited are kept for `event()`)."""

    def __init__(self, sock):
        self.socket = sock
        self.buffer = b""
        self.pending = collections.deque()
        self.closed = False

    @classmethod
    def unix(cls, path):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(WAIT)
        sock.connect(path)
        return cls(sock)

    @classmethod
    def tcp(cls, port):
        sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.socket.close()
        except OSError:
            pass

    def send(self, message):
        line = message if isinstance(message, str) else json.dumps(message)
        self.socket.sendall(line.encode() + b"\n")

    def receive(self, timeout=WAIT):
        """The next message (a dict), None when the daemon closed; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if self.closed:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"nothing within {timeout} s")
            self.socket.settimeout(remaining)
            try:
                chunk = self.socket.recv(1 << 16)
            except socket.timeout:
                raise TimeoutError(f"nothing within {timeout} s") from None
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if not chunk:
                self.closed = True
                if not self.buffer:
                    return None
                self.buffer += b"\n"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, message, timeout=WAIT):
        """Sends one request; its response (events before it are kept)."""
        self.send(message)
        while True:
            answer = self.receive(timeout)
            if answer is None:
                raise EOFError(f"the daemon closed the connection instead of answering {message!r}")
            if "event" in answer:
                self.pending.append(answer)
                continue
            return answer

    def event(self, timeout=WAIT):
        """The next event; a response here is a test failure."""
        if self.pending:
            return self.pending.popleft()
        answer = self.receive(timeout)
        if answer is None:
            raise EOFError("the daemon closed the connection while an event was awaited")
        assert "event" in answer, f"expected an event, got {answer}"
        return answer

    def quiet(self, seconds=0.4):
        """Asserts that no message arrives for `seconds`; returns what did (for messages)."""
        arrived = list(self.pending)
        self.pending.clear()
        try:
            message = self.receive(seconds)
        except TimeoutError:
            message = None
        else:
            if message is not None:
                arrived.append(message)
        return arrived

    def wait_closed(self, timeout=WAIT):
        """Reads until the daemon closes; the messages that came first. TimeoutError if it
        does not."""
        arrived = list(self.pending)
        self.pending.clear()
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(max(0.01, deadline - time.monotonic()))
            if message is None:
                return arrived
            arrived.append(message)


class WebSocketConnection(LineConnection):
    """The same over GET /v1/ws: one protocol line per text message."""

    def __init__(self, daemon, query_token=None, header=None):
        url = f"ws://127.0.0.1:{daemon.port}/v1/ws"
        if query_token is not None:
            url += "?token=" + urllib.parse.quote(query_token, safe="")
        self.ws = websocket.create_connection(url, timeout=WAIT, header=header or [])
        super().__init__(None)

    def close(self):
        try:
            self.ws.close(timeout=1)
        except Exception:
            pass

    def send(self, message):
        self.ws.send(message if isinstance(message, str) else json.dumps(message))

    def receive(self, timeout=WAIT):
        if self.closed:
            return None
        self.ws.settimeout(max(timeout, 0.01))
        try:
            text = self.ws.recv()
        except websocket.WebSocketTimeoutException:
            raise TimeoutError(f"nothing within {timeout} s") from None
        except socket.timeout:
            raise TimeoutError(f"nothing within {timeout} s") from None
        except (websocket.WebSocketConnectionClosedException, ConnectionError, OSError):
            text = ""
        if not text:
            self.closed = True
            return None
        return json.loads(text)


class EventStream:
    """A Server-Sent Events reader on a raw socket. `status` and `headers` of the answer; for a
    stream, `next()` gives (id, event, data); otherwise `body` is the parsed answer."""

    def __init__(self, port, path, headers=()):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        head += "".join(f"{header}\r\n" for header in headers) + "\r\n"
        self.socket.sendall(head.encode())
        self.buffer = b""
        self.ended = False
        status_line = self._line(WAIT)
        self.status = int(status_line.split()[1])
        self.headers = {}
        while (line := self._line(WAIT).rstrip("\r")):
            name, value = line.split(":", 1)
            self.headers[name.lower()] = value.strip()
        self.body = None
        self.chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        if self.status != 200:
            self.body = self._read_body()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the event stream was silent")
        self.socket.settimeout(remaining)
        try:
            chunk = self.socket.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError("the event stream was silent") from None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.ended = True
            raise EOFError("the stream ended")
        self.buffer += chunk

    def _line(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            self._fill(deadline)
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def _read_body(self):
        length = self.headers.get("content-length")
        deadline = time.monotonic() + WAIT
        if length is not None:
            while len(self.buffer) < int(length):
                self._fill(deadline)
            raw = self.buffer[:int(length)]
        elif self.chunked:
            raw = b""
            while True:
                size = int(self._line(WAIT).strip() or "0", 16)
                if size == 0:
                    break
                while len(self.buffer) < size + 2:
                    self._fill(deadline)
                raw += self.buffer[:size]
                self.buffer = self.buffer[size + 2:]
        else:
            try:
                while True:
                    self._fill(deadline)
            except EOFError:
                pass
            raw = self.buffer
        try:
            return json.loads(raw.decode())
        except ValueError:
            return raw.decode(errors="replace")

    def _text_line(self, deadline):
        """One line of the event stream's text (chunked transfer taken apart when used)."""
        if not self.chunked:
            return self._line(max(0.01, deadline - time.monotonic()))
        # Chunked: keep a decoded text buffer.
        while b"\n" not in getattr(self, "_text", b""):
            size_line = self._line(max(0.01, deadline - time.monotonic())).strip()
            if not size_line:
                continue
            size = int(size_line.split(";")[0], 16)
            if size == 0:
                self.ended = True
                raise EOFError("the stream ended")
            while len(self.buffer) < size + 2:
                self._fill(deadline)
            self._text = getattr(self, "_text", b"") + self.buffer[:size]
            self.buffer = self.buffer[size + 2:]
        line, self._text = self._text.split(b"\n", 1)
        return line.decode()

    def next(self, timeout=WAIT):
        """(id, event, data) of the next event."""
        assert self.status == 200, (self.status, self.body)
        deadline = time.monotonic() + timeout
        fields = {}
        while True:
            line = self._text_line(deadline).rstrip("\r")
            if line == "":
                if "data" in fields:
                    return fields.get("id"), fields.get("event"), json.loads(fields["data"])
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value

    def quiet(self, seconds=0.4):
        """The events that arrive within `seconds` (none expected, as a rule)."""
        arrived = []
        try:
            while True:
                arrived.append(self.next(seconds))
        except (TimeoutError, EOFError):
            return arrived

    def wait_end(self, timeout=WAIT):
        """The events before the stream ends; TimeoutError if it does not end."""
        arrived = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                arrived.append(self.next(max(0.01, deadline - time.monotonic())))
        except EOFError:
            return arrived

    def close(self):
        try:
            self.socket.close()
        except OSError:
            pass


# MARK: - Expectations


def refused(answer, right=None, collection=None, op=None):
    """Asserts an `unauthorized` refusal whose message names `right` and `collection`."""
    assert answer.get("ok") is False, answer
    assert answer["error"]["code"] == "unauthorized", answer
    message = answer["error"]["message"]
    assert isinstance(message, str) and message, answer
    if op is not None:
        assert answer.get("op") == op, answer
    if right is not None:
        assert right in message, f"the message does not name the right {right!r}: {answer}"
    if collection is not None:
        assert collection in message, f"the message does not name {collection!r}: {answer}"


def accepted(answer, op=None):
    assert answer.get("ok") is True, answer
    if op is not None:
        assert answer.get("op") == op, answer
    return answer


def wait_until(condition, timeout=WAIT, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise TimeoutError(what)


_names = itertools.count(1)


@pytest.fixture
def ns():
    """A name prefix of this test's own, so that tests sharing a daemon never meet."""
    return f"t{next(_names)}x{os.getpid() % 1000}"


@pytest.fixture(scope="session")
def jwks_dir():
    directory = tempfile.mkdtemp(prefix="diffcast-jwks-")
    yield pathlib.Path(directory)
    shutil.rmtree(directory, ignore_errors=True)


MAIN_KEYS = ("hs", "rs", "rs2", "es", "ed")


@pytest.fixture(scope="session")
def main_jwks(keys, jwks_dir):
    return write_jwks(jwks_dir / "main.json", [keys[name] for name in MAIN_KEYS])


@pytest.fixture(scope="session")
def daemon(main_jwks):
    """The daemon most tests share: the main key set, TCP and HTTP on loopback, no static
    token, no anonymous rights. No test presents a bad token to it (see `fresh_daemon`)."""
    with AccessDaemon(["--auth-keys", str(main_jwks)]) as running:
        yield running


@pytest.fixture
def fresh_daemon(main_jwks):
    """A daemon of the test's own, as `daemon`: for tests that present refused tokens, so that
    whatever a daemon remembers of refused tokens (beyond the SPEC) stays with that test."""
    with AccessDaemon(["--auth-keys", str(main_jwks)]) as running:
        yield running


TRANSPORTS = ["unix", "tcp", "ws"]
