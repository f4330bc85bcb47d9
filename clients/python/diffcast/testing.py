"""A real diffcastd for tests: started on a socket in a temporary folder, stopped at the end.

    with Daemon("/usr/bin/diffcastd") as daemon:
        client = daemon.client()
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from .client import Client, connect_with_retry


class Daemon:
    #: Seconds a start may take before its socket answers.
    start_seconds = 5

    def __init__(self, binary=None, arguments=(), directory=None, socket_path=None):
        self.binary = binary or os.environ.get("DIFFCASTD") or shutil.which("diffcastd") or "diffcastd"
        self.arguments = list(arguments)
        self._own_directory = directory is None
        self.directory = directory or tempfile.mkdtemp(prefix="diffcast-test-")
        self.socket_path = socket_path or os.path.join(self.directory, "d.sock")
        self.log_path = os.path.join(self.directory, "daemon.log")
        self.process = None

    def start(self):
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [self.binary, "--socket", self.socket_path] + self.arguments, stdout=subprocess.DEVNULL, stderr=log
        )
        log.close()
        connect_with_retry(self.socket_path, attempts=int(self.start_seconds * 10)).close()
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.process and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=20)
        return self.process.returncode if self.process else None

    def restart(self, sig=signal.SIGTERM):
        self.stop(sig)
        return self.start()

    def client(self, **options):
        return Client(self.socket_path, **options)

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as file:
            return file.read()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop(signal.SIGKILL if exc[0] else signal.SIGTERM)
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def wait_for(self, condition, timeout=10, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.02)
        raise TimeoutError(what)


class Proxy:
    """Relays one Unix socket to another and can damage the next event it passes to clients:
    what a client sees when a byte flips on the way."""

    def __init__(self, target_path, directory=None):
        self.target_path = target_path
        self.socket_path = os.path.join(directory or tempfile.mkdtemp(prefix="diffcast-proxy-"), "proxy.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.socket_path)
        self._listener.listen(16)
        self._damage = None
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def damage_next_event(self, change):
        """``change(line: bytes) -> bytes`` is applied to the next event line sent to a client."""
        with self._lock:
            self._damage = change

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.target_path)
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, source, destination, to_client):
        pending = b""
        try:
            while True:
                chunk = source.recv(1 << 16)
                if not chunk:
                    break
                if not to_client:
                    destination.sendall(chunk)
                    continue
                pending += chunk
                *lines, pending = pending.split(b"\n")
                out = []
                for line in lines:
                    with self._lock:
                        change, self._damage = (self._damage, None) if line.startswith(b'{"event"') else (None, self._damage)
                    out.append(change(line) if change else line)
                if out:
                    destination.sendall(b"\n".join(out) + b"\n")
        except OSError:
            pass
        finally:
            for end in (source, destination):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self._listener.close()
