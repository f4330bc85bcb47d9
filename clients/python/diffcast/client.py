"""A connection to diffcastd: requests (pipelined when wanted), events, and a follower."""

import collections
import errno
import json
import os
import socket
import time

from .mirror import Divergence, Mirror, parse_preserving

SYSTEM_SOCKET = "/run/diffcast/diffcast.sock"
DEFAULT_SOCKET = "/tmp/diffcast.sock"


class DiffcastError(Exception):
    """An error response: ``code`` (e.g. ``unknown_item``) and the daemon's ``message``."""

    def __init__(self, code, message, response=None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.response = response


class CannotConnect(ConnectionError):
    """No connection could be made: ``endpoint`` (a socket path or ``host:port``) and the likely
    ``cause`` in words; ``errno`` is the system's error number when there is one."""

    def __init__(self, endpoint, cause, code=None):
        super().__init__(code, "cannot connect to %s: %s" % (endpoint, cause))
        self.endpoint = endpoint
        self.cause = cause

    def __str__(self):
        return self.strerror


def _unix_connect_cause(error, path):
    """Words for a failed connect(2) on a Unix socket, naming the usual fix."""
    if os.path.isdir(path):
        return "%s is a directory: give the socket's path (diffcastd --socket)" % path
    if error.errno == errno.ENOENT:
        return "no socket at %s: is diffcastd running, and listening there? (set DIFFCAST_SOCKET to its --socket)" % path
    if error.errno == errno.ECONNREFUSED:
        return "nobody listens on %s: diffcastd is not running (a socket file left behind)" % path
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied on %s: join the socket's group (e.g. sudo usermod -aG diffcast $USER) or use sudo" % path
    if error.errno == errno.ENOTSOCK:
        return "%s is not a socket" % path
    return error.strerror or str(error)


def default_socket():
    """``$DIFFCAST_SOCKET``, else the system service's socket when it exists, else /tmp's
    (the rule of the ``diffcast`` command)."""
    return os.environ.get("DIFFCAST_SOCKET") or (SYSTEM_SOCKET if os.path.exists(SYSTEM_SOCKET) else DEFAULT_SOCKET)


def _items(items):
    """Items as the wire wants them: ids stay bare, ``(id, data)`` pairs and dicts become objects."""
    result = []
    for item in items:
        if isinstance(item, tuple):
            result.append({"id": item[0], "data": item[1]})
        else:
            result.append(item)
    return result


class Client:
    """One connection. Responses come back in request order; events that arrive meanwhile are
    kept for ``events()``. Not thread-safe: use one client per thread.

    Raises ``CannotConnect`` when the daemon cannot be reached."""

    def __init__(self, socket_path=None, tcp=None, token=None, timeout=None):
        self.socket_path = None if tcp is not None else socket_path or default_socket()
        self.tcp = tcp
        self._token = token
        self._timeout = timeout
        self._socket = None
        #: The window of each collection as last asked for by ``subscribe`` or ``window`` (None:
        #: the whole collection); kept across ``reconnect``, for ``follow`` to subscribe again.
        self._windows = {}
        self.reconnect()

    def reconnect(self):
        """Closes the connection and opens a new one to the same daemon (authenticating again).
        Subscriptions and events not yet read are not carried over."""
        if self._socket is not None:
            self._socket.close()
        self._buffer = b""
        self._events = collections.deque()
        self._socket = self._connect()
        if self._token is not None:
            self.request("auth", token=self._token)

    def _connect(self):
        if self.tcp is not None:
            host, port = self.tcp
            try:
                connection = socket.create_connection((host, port), timeout=self._timeout)
            except OSError as error:
                raise CannotConnect("%s:%s" % (host, port), error.strerror or str(error), error.errno) from error
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return connection
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(self._timeout)
        try:
            connection.connect(self.socket_path)
        except OSError as error:
            connection.close()
            raise CannotConnect(self.socket_path, _unix_connect_cause(error, self.socket_path), error.errno) from error
        return connection

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._socket.close()

    # Lines

    def send_lines(self, objects):
        payload = b"".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for o in objects)
        self._socket.sendall(payload)

    def _read_line(self, timeout=None):
        """The next line's bytes (an event starts with ``{"event"``, as the daemon writes it)."""
        while b"\n" not in self._buffer:
            if timeout is not None:
                self._socket.settimeout(timeout)
            chunk = self._socket.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the daemon closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _response(self):
        while True:
            line = self._read_line()
            if line.startswith(b'{"event"'):
                self._events.append(line)
            else:
                return json.loads(line)

    # Requests

    def pipeline(self, requests):
        """Sends the requests (dicts with ``op``) in one write; returns their responses in order,
        error responses included (not raised)."""
        self.send_lines(requests)
        return [self._response() for _ in requests]

    def request(self, op, collection=None, **arguments):
        """One request; returns the response, raises ``DiffcastError`` when it is not ok."""
        request = {"op": op}
        if collection is not None:
            request["collection"] = collection
        request.update({k: v for k, v in arguments.items() if v is not None})
        response = self.pipeline([request])[0]
        if not response.get("ok"):
            error = response.get("error", {})
            raise DiffcastError(error.get("code"), error.get("message"), response)
        return response

    def ping(self):
        return self.request("ping")

    def list(self):
        return self.request("list")["collections"]

    def stats(self):
        return self.request("stats")

    def get(self, collection, window=None):
        """The collection's ``version``, ``epoch``, ``sections`` and ``digest``; with a window
        (``{"first": N}``, ``{"last": N}`` or ``{"anchor": ID, "before": B, "after": A}``) those
        of its view, and the ``window`` object (``offset``, ``count``, ``total``)."""
        return self.request("get", collection, window=window)

    def apply(self, collection, sections):
        return self.request("apply", collection, sections=sections)["version"]

    def append_sections(self, collection, sections):
        return self.request("append_sections", collection, sections=sections)["version"]

    def insert_sections(self, collection, sections, before=None, after=None):
        return self.request("insert_sections", collection, sections=sections, before=before, after=after)["version"]

    def delete_sections(self, collection, ids):
        return self.request("delete_sections", collection, sections=list(ids))["version"]

    def reload_sections(self, collection, ids):
        return self.request("reload_sections", collection, sections=list(ids))["version"]

    def move_section(self, collection, section, before=None, after=None):
        return self.request("move_section", collection, section=section, before=before, after=after)["version"]

    def update_sections(self, collection, data_by_id):
        sections = [{"id": k, "data": v} for k, v in dict(data_by_id).items()]
        return self.request("update_sections", collection, sections=sections)["version"]

    def append_items(self, collection, items, section=None):
        return self.request("append_items", collection, items=_items(items), section=section)["version"]

    def insert_items(self, collection, items, before=None, after=None):
        return self.request("insert_items", collection, items=_items(items), before=before, after=after)["version"]

    def delete_items(self, collection, ids):
        return self.request("delete_items", collection, items=list(ids))["version"]

    def reload_items(self, collection, ids):
        return self.request("reload_items", collection, items=list(ids))["version"]

    def reconfigure_items(self, collection, ids):
        return self.request("reconfigure_items", collection, items=list(ids))["version"]

    def move_item(self, collection, item, before=None, after=None):
        return self.request("move_item", collection, item=item, before=before, after=after)["version"]

    def update_items(self, collection, data_by_id):
        """``data_by_id``: a mapping (or pairs) of item id to its new data."""
        items = [{"id": k, "data": v} for k, v in dict(data_by_id).items()]
        return self.request("update_items", collection, items=items)["version"]

    def delete_all(self, collection):
        return self.request("delete_all", collection)["version"]

    def drop(self, collection):
        self.request("drop", collection)

    def batch(self, collection, ops):
        """Several writes (dicts with ``op``, no collection), all or nothing."""
        return self.request("batch", collection, ops=ops)["version"]

    # Events

    def subscribe(self, collection, since=None, epoch=None, window=None):
        """Subscribes (replacing this connection's subscription to the collection, if any); the
        events follow, read with ``events()``. With a window the events bring its view only; a
        window never resumes from ``since`` (the daemon answers ``invalid_argument``)."""
        response = self.request("subscribe", collection, since=since, epoch=epoch, window=window)
        self._windows[collection] = window
        return response

    def window(self, collection, window):
        """Moves this connection's windowed subscription to another window. The changeset to the
        new window's view (if it differs) arrives before the response, which is returned."""
        response = self.request("window", collection, window=window)
        self._windows[collection] = window
        return response

    def unsubscribe(self, collection):
        response = self.request("unsubscribe", collection)
        self._windows.pop(collection, None)
        return response

    def _event_lines(self, timeout):
        while True:
            if self._events:
                yield self._events.popleft()
                continue
            try:
                line = self._read_line(timeout)
            except socket.timeout:
                return
            finally:
                self._socket.settimeout(self._timeout)
            if line.startswith(b'{"event"'):
                yield line

    def events(self, timeout=None):
        """Yields event dicts as they arrive; stops after ``timeout`` seconds without one."""
        for line in self._event_lines(timeout):
            yield json.loads(line)

    def follow(self, collection, mirror=None, timeout=None, reconnect_for=10.0, window=None):
        """Subscribes (from ``mirror``'s version when given one) and yields ``(event, mirror)``
        for every event, the mirror verified against its digest.

        After a divergence (an event that does not fit, or a line that is not JSON) it subscribes
        again without ``since`` and skips the collection's events until the snapshot. When the
        connection is lost it reconnects (waiting 50 ms, doubling to 1 s) and subscribes from
        the version it holds, so the daemon sends one changeset, or a snapshot when its history
        does not reach back. Stops after ``timeout`` seconds without an event; raises
        ``CannotConnect`` after ``reconnect_for`` seconds of failed attempts (None: never).

        With a ``window`` the mirror holds its view (``mirror.window`` says where it stands). A
        window never resumes from a version: after a divergence or a reconnection it subscribes
        again with the window (the last one ``window()`` set, if it moved), and the daemon sends
        a snapshot of the view. An anchor window subscribes again around the anchor its view last
        had; when that item is gone, around the first item of the view after it that is still
        there, else the last before it, else the collection's first item (the anchor rule).
        """
        mirror = mirror if mirror is not None else Mirror()
        self._windows[collection] = window
        resynchronizing = False
        while True:
            try:
                if self._windows.get(collection) is not None:
                    self._subscribe_window(collection, mirror)
                elif mirror.version is not None and mirror.window is None and not resynchronizing:
                    self.subscribe(collection, since=mirror.version, epoch=mirror.epoch)
                else:
                    self.subscribe(collection)
                for line in self._event_lines(timeout):
                    try:
                        event = _parse_event(line)
                        if event.get("collection") != collection:
                            continue
                        if resynchronizing and event.get("event") != "snapshot":
                            continue
                        resynchronizing = False
                        mirror.feed(event)
                    except Divergence as divergence:
                        mirror.divergences.append(str(divergence))
                        resynchronizing = True
                        if self._windows.get(collection) is not None:
                            self._subscribe_window(collection, mirror)
                        else:
                            self.subscribe(collection)
                        continue
                    yield json.loads(line), mirror
                return
            except OSError:
                self._reconnect_patiently(reconnect_for)

    def _subscribe_window(self, collection, mirror):
        """Subscribes with the collection's window again; an anchor window around the anchor
        ``mirror`` last held, or the item that takes its place (see ``follow``)."""
        window = self._windows[collection]
        if not isinstance(window, dict) or "anchor" not in window or mirror.window is None:
            return self.subscribe(collection, window=window)
        held = [item.id for section in mirror.sections for item in section.items]
        anchor = mirror.window.get("anchor")
        if anchor in held:
            k = held.index(anchor)
            candidates = [anchor] + held[k + 1:] + held[:k][::-1]
        else:
            candidates = []
        for _ in range(3):  # the first item may go between the get and the subscribe
            for candidate in candidates:
                try:
                    return self.subscribe(collection, window=dict(window, anchor=candidate))
                except DiffcastError as error:
                    if error.code != "unknown_item":
                        raise
            try:
                sections = self.get(collection, window={"first": 1})["sections"]
            except DiffcastError as error:
                if error.code != "unknown_collection":
                    raise
                sections = []
            first = [item for section in sections for item in section.get("items", [])]
            if not first:
                raise DiffcastError("unknown_item", "no item of %r is left to anchor the window %s" % (collection, json.dumps(window)))
            candidates = [first[0]["id"] if isinstance(first[0], dict) else first[0]]
        return self.subscribe(collection, window=dict(window, anchor=candidates[0]))

    def _reconnect_patiently(self, seconds):
        """Reconnects, waiting 50 ms doubling to 1 s between attempts; raises the last attempt's
        error once ``seconds`` have passed (None: never)."""
        deadline = None if seconds is None else time.monotonic() + seconds
        delay = 0.05
        while True:
            try:
                return self.reconnect()
            except OSError:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise
            time.sleep(delay if remaining is None else min(delay, remaining))
            delay = min(delay * 2, 1.0)


def _parse_event(line):
    """An event line as a dict, numbers kept as text; ``Divergence`` when it is not JSON."""
    try:
        return parse_preserving(line)
    except (ValueError, RecursionError) as error:
        raise Divergence("an event line that is not JSON: %s" % error) from None


def connect_with_retry(socket_path=None, attempts=50, delay=0.1, **options):
    """A client, retrying while the daemon starts (no socket yet, or refused)."""
    for attempt in range(attempts):
        try:
            return Client(socket_path, **options)
        except CannotConnect as error:
            if attempt == attempts - 1 or error.errno not in (errno.ENOENT, errno.ECONNREFUSED):
                raise
            time.sleep(delay)
