#!/usr/bin/env python3
"""Diffcast's browser transports against nginx + Nchan: the growing feed over Server-Sent Events
and over WebSocket, in the same run, alternated.

One publisher writes M items of ~100 bytes, one per write, with at most W unanswered (W = 64:
pipelined, as a backend would; W = 1: one write at a time, each its own event), on the server's
Unix socket: Diffcast `append_items` lines; Nchan HTTP/1.1 POSTs to its publisher location on one
keep-alive connection (nginx answers pipelined requests in order; one connection with the same
window as Diffcast's, where more connections would only be a wider window). S subscribers
(client.mjs: the same code for both servers) read every item over SSE or WebSocket. Deliveries/s:
S × M over the time from the first write to the last item's arrival; latency: from a write's send
to the read that completed its event, over every delivery. Every subscriber must have all M
items, the last one `i<M-1>`; a run in which one did not is run again and noted. nginx runs
unprivileged (as nobody when started as root) from a temporary prefix, with the module of
libnginx-mod-nchan and nginx.conf.template.

The WebSocket table adds nats-server's own WebSocket listener (when nats-server is installed):
subscribers send CONNECT and SUB over WebSocket, the publisher core NATS PUBs on its TCP client
port, each followed by a PING whose PONG stands for the answer core NATS does not give.

    DIFFCASTD=.build/release/diffcastd python3 Benchmarks/web/bench_web.py [--subscribers 10,1000]
"""

import argparse
import array
import json
import os
import pwd
import resource
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "client.mjs")
TICKS = os.sysconf("SC_CLK_TCK")

TEMPLATE = os.path.join(HERE, "nginx.conf.template")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid, thread=None, system=False):
    """User + system CPU of a process (all its threads), or of one of its threads (system: only
    the system time)."""
    path = f"/proc/{pid}/task/{thread}/stat" if thread else f"/proc/{pid}/stat"
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return ((0 if system else int(fields[11])) + int(fields[12])) / TICKS
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    return found


def tail(path, lines=5):
    """The end of a server's log, for an error message."""
    try:
        with open(path, errors="replace") as f:
            last = f.read().splitlines()[-lines:]
    except FileNotFoundError:
        return ""
    return "".join(f"\n  {path}: {line}" for line in last)


def wait_connectable(address, deadline=15.0, process=None, log=lambda: ""):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}{log()}")
        try:
            if isinstance(address, str):
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(address)
            else:
                socket.create_connection(address, timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {address}{log()}")


def stop_process(process):
    """SIGTERM, then SIGKILL after 10 s."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def roundtrip(path, data, answers=1):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(data)
        received = b""
        while received.count(b"\n") < answers:
            chunk = s.recv(65536)
            if not chunk:
                break
            received += chunk
        return received.decode()


class Diffcast:
    """A diffcastd; `name` tells a baseline build from the one measured, `compact` whether its
    subscribers ask for compact changesets."""

    def __init__(self, binary, directory, name="diffcastd", compact=True):
        self.binary = binary
        self.directory = directory
        self.name = name
        self.compact = compact

    def start(self, messages):
        self.socket = os.path.join(self.directory, "d.sock")
        self.port = free_port()
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        with open(os.path.join(self.directory, "diffcastd.log"), "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "--socket", self.socket, "--http", f"127.0.0.1:{self.port}", "--log-level", "warning"],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        wait_connectable(self.socket, process=self.process, log=self.log_tail)
        wait_connectable(("127.0.0.1", self.port), process=self.process, log=self.log_tail)
        answer = roundtrip(self.socket, b'{"op":"append_sections","collection":"feed","sections":[{"id":"s"}]}\n')
        if '"ok":true' not in answer:
            raise RuntimeError(f"diffcastd: {answer}")

    def pids(self):
        return [self.process.pid]

    def log_tail(self):
        return tail(os.path.join(self.directory, "diffcastd.log"))

    def stop(self):
        stop_process(self.process)


class Nchan:
    name = "nginx + nchan"

    def __init__(self, nginx, module, directory, workers, buffer):
        self.nginx = nginx
        self.module = module
        self.directory = directory
        self.workers = workers
        self.buffer = buffer

    def start(self, messages):
        prefix = os.path.join(self.directory, "nginx")
        shutil.rmtree(prefix, ignore_errors=True)
        os.makedirs(prefix)
        self.port = free_port()
        self.socket = os.path.join(prefix, "nginx.sock")
        conf = os.path.join(prefix, "nginx.conf")
        with open(TEMPLATE) as f:
            text = f.read()
        values = {
            "MODULE": self.module,
            "WORKERS": self.workers,
            "PREFIX": prefix,
            "PORT": self.port,
            "BUFFER": self.buffer or messages,
            "SHARED_MEMORY": f"{max(256, (self.buffer or messages) // 512)}M",
        }
        for name, value in values.items():
            text = text.replace(f"@{name}@", str(value))
        with open(conf, "w") as f:
            f.write(text)
        drop = None
        if os.geteuid() == 0:
            # Unprivileged: run the master as nobody (it owns the prefix), never as root.
            nobody = pwd.getpwnam("nobody")
            for root, dirs, files in os.walk(prefix):
                for entry in [root] + [os.path.join(root, name) for name in dirs + files]:
                    os.chown(entry, nobody.pw_uid, nobody.pw_gid)
            os.chmod(self.directory, 0o755)

            def drop():
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)

        self.log = os.path.join(prefix, "error.log")
        self.process = subprocess.Popen(
            [self.nginx, "-p", prefix, "-c", conf, "-e", self.log],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=drop,
        )
        wait_connectable(self.socket, process=self.process, log=self.log_tail)
        wait_connectable(("127.0.0.1", self.port), process=self.process, log=self.log_tail)

    def pids(self):
        return [self.process.pid] + children(self.process.pid)

    def log_tail(self):
        return tail(self.log)

    def subscribers(self):
        """Nchan's own count of the channel's subscribers (its publisher location, GET)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(self.socket)
            s.sendall(b"GET /pub/feed HTTP/1.1\r\nHost: nchan\r\nAccept: text/plain\r\nConnection: close\r\n\r\n")
            received = b""
            while chunk := s.recv(65536):
                received += chunk
        for line in received.decode("latin1").splitlines():
            if line.startswith("active subscribers:"):
                return int(line.split(":")[1])
        return 0

    def stop(self):
        stop_process(self.process)


class Nats:
    """nats-server with its own WebSocket listener (no TLS) for the subscribers and its TCP client
    port for the publisher (nats-server has no Unix socket)."""

    name = "nats-server"

    def __init__(self, binary, directory):
        self.binary = binary
        self.directory = directory

    def start(self, messages):
        self.port = free_port()
        self.client_port = free_port()
        self.socket = None
        conf = os.path.join(self.directory, "nats.conf")
        self.log = os.path.join(self.directory, "nats.log")
        # Outbound buffers as large as a run can need (Nchan keeps every message too): a lagging
        # subscriber must not be cut off as a slow consumer.
        with open(conf, "w") as f:
            f.write(
                f'listen: "127.0.0.1:{self.client_port}"\n'
                f"max_pending: 1GB\n"
                f'write_deadline: "60s"\n'
                f'websocket {{\n  listen: "127.0.0.1:{self.port}"\n  no_tls: true\n}}\n'
            )
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "-c", conf], stdout=subprocess.DEVNULL, stderr=log
            )
        wait_connectable(("127.0.0.1", self.client_port), process=self.process, log=self.log_tail)
        wait_connectable(("127.0.0.1", self.port), process=self.process, log=self.log_tail)

    def pids(self):
        return [self.process.pid]

    def log_tail(self):
        return tail(self.log)

    def stop(self):
        stop_process(self.process)


class Incomplete(RuntimeError):
    """A run in which some subscriber did not get every message, in order."""


def read_json(process, what, timeout):
    """The next JSON line of a child's stdout (the children print nothing else)."""
    buffered = read_json.pending.setdefault(process.pid, b"")
    end = time.monotonic() + timeout
    while b"\n" not in buffered:
        left = end - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"{what}: no answer in {timeout:.0f} s")
        ready, _, _ = select.select([process.stdout], [], [], left)
        if ready:
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"{what}: exited ({process.wait()})")
            buffered += chunk
    line, buffered = buffered.split(b"\n", 1)
    read_json.pending[process.pid] = buffered
    message = json.loads(line)
    if "error" in message:
        raise RuntimeError(f"{what}: {message['error']}")
    return message


read_json.pending = {}


def trial(server, transport, subscribers, messages, window, args, directory):
    """One measurement: a fresh server, S subscribers (over --clients processes), M pipelined writes."""
    server.start(messages)
    kind = "diffcast" if isinstance(server, Diffcast) else "nats" if isinstance(server, Nats) else "nchan"
    clients = []
    publisher = None
    try:
        shares = [subscribers // args.clients + (1 if n < subscribers % args.clients else 0) for n in range(args.clients)]
        for share in (share for share in shares if share):
            options = {
                "server": kind,
                "transport": transport,
                "port": server.port,
                "subscribers": share,
                "messages": messages,
                "stallSeconds": args.stall,
                "compact": getattr(server, "compact", False),
            }
            clients.append(
                subprocess.Popen(
                    [args.node, CLIENT, "subscribe", json.dumps(options)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
                )
            )
        for client in clients:
            read_json(client, "subscribers", 60)
        if isinstance(server, Nchan):
            end = time.monotonic() + 10
            while (count := server.subscribers()) < subscribers:
                if time.monotonic() > end:
                    raise RuntimeError(f"nchan counts {count} subscribers of {subscribers}")
                time.sleep(0.05)
        send_times = os.path.join(directory, "sent.f64")
        options = {
            "server": kind,
            "socket": server.socket,
            "port": getattr(server, "client_port", None),
            "messages": messages,
            "window": window,
            "bytes": args.bytes,
            "sendTimes": send_times,
        }
        publisher = subprocess.Popen(
            [args.node, CLIENT, "publish", json.dumps(options)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        read_json(publisher, "publisher", 30)

        # CPU over the run: the server's processes, each client's main thread (the one that reads:
        # at 100 % it would be the bottleneck), the publisher's own account from "go" on.
        pids = server.pids()
        server_before = sum(cpu_seconds(pid) for pid in pids)
        server_system_before = sum(cpu_seconds(pid, system=True) for pid in pids)
        client_system_before = sum(cpu_seconds(client.pid, client.pid, system=True) for client in clients)
        clients_before = [cpu_seconds(client.pid, client.pid) for client in clients]
        began = time.monotonic()
        publisher.stdin.write(b"go\n")
        publisher.stdin.flush()
        delivered = [read_json(client, "subscribers", args.stall * 4 + 120) for client in clients]
        wall = time.monotonic() - began
        server_cpu = sum(cpu_seconds(pid) for pid in pids) - server_before
        server_system = sum(cpu_seconds(pid, system=True) for pid in pids) - server_system_before
        client_system = sum(cpu_seconds(c.pid, c.pid, system=True) for c in clients) - client_system_before
        clients_cpu = [cpu_seconds(client.pid, client.pid) - before for client, before in zip(clients, clients_before)]
        published = read_json(publisher, "publisher", args.stall + 30)
        publisher.wait()
        reports = []
        latencies = array.array("d")
        for n, client in enumerate(clients):
            path = os.path.join(directory, f"latencies-{n}.f64")
            client.stdin.write(f"report {send_times} {path}\n".encode())
            client.stdin.flush()
            reports.append(read_json(client, "subscribers", 120))
            client.wait()
            with open(path, "rb") as f:
                latencies.frombytes(f.read())
        if published["rejected"]:
            raise RuntimeError(f"{server.name}: {published['rejected']} writes rejected ({published['lastAnswer']})")
        wrong = sum(report["wrong"] for report in reports)
        if not all(message["delivered"] for message in delivered) or wrong:
            examples = [example for report in reports for example in report["examples"]][:3]
            failures = [failure for report in reports for failure in report["failures"]][:3]
            raise Incomplete(
                f"{server.name} {transport} S={subscribers}: {wrong} subscribers without all {messages} items "
                f"in order, e.g. {examples}; {failures}{server.log_tail()}"
            )
        if len(clients) > 1:
            latencies = sorted(latencies)
        deliveries = sum(report["deliveries"] for report in reports)
        seconds = (max(report["lastDelivery"] for report in reports) - published["first"]) / 1e3
        percentile = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))]
        result = {
            "deliveriesPerSecond": deliveries / seconds,
            "p50": percentile(0.5),
            "p99": percentile(0.99),
            "events": sum(report["events"] for report in reports) / subscribers,
            "bytes": sum(report["bytes"] for report in reports) / deliveries,
            "serverPercent": 100 * server_cpu / wall,
            "serverMicroseconds": 1e6 * server_cpu / deliveries,
            "clientPercent": 100 * sum(clients_cpu) / wall,
            "busiestClientPercent": 100 * max(clients_cpu) / wall,
            "clientMicroseconds": 1e6 * sum(clients_cpu) / deliveries,
            "publisherPercent": 100 * (published["cpu"]["user"] + published["cpu"]["system"]) / 1e6 / wall,
            "reads": sum(report["reads"] for report in reports),
            "wall": wall,
            "serverSystemShare": server_system / max(server_cpu, 1e-9),
            "clientSystemShare": client_system / max(sum(clients_cpu), 1e-9),
        }
        if args.verbose:
            print(f"<!-- {server.name} {transport} S={subscribers}: {json.dumps(result)} -->", file=sys.stderr)
        return result
    finally:
        for child in [publisher] + clients:
            if child is not None and child.poll() is None:
                child.kill()
                child.wait()
        server.stop()


def median(rows, key):
    return statistics.median(row[key] for row in rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--diffcastd", default=os.environ.get("DIFFCASTD", ".build/release/diffcastd"))
    parser.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    parser.add_argument("--nchan-module", default="/usr/lib/nginx/modules/ngx_nchan_module.so")
    parser.add_argument(
        "--nats-server",
        default=shutil.which("nats-server") or "",
        help="nats-server, a third server in the WebSocket table (its own WebSocket listener; empty: none)",
    )
    parser.add_argument("--node", default=shutil.which("node") or "node")
    parser.add_argument("--transports", default="sse,ws", help="sse, ws or both (comma-separated)")
    parser.add_argument("--subscribers", default="10,1000", help="subscriber counts (comma-separated)")
    parser.add_argument(
        "--windows",
        default="64,1",
        help="unanswered writes the publisher allows itself, one set of rows each (1: every write alone)",
    )
    parser.add_argument(
        "--deliveries",
        type=int,
        default=1_000_000,
        help="deliveries per pipelined measurement: M = DELIVERIES / S messages (at least 100)",
    )
    parser.add_argument(
        "--lone-deliveries",
        type=int,
        default=300_000,
        help="deliveries per measurement with a window of 1 (M = LONE_DELIVERIES / S, at least 100)",
    )
    parser.add_argument("--messages", type=int, help="messages per measurement, whatever S and the window are")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (the median is reported)")
    parser.add_argument("--bytes", type=int, default=100, help="bytes of each item's JSON")
    parser.add_argument("--nginx-workers", type=int, default=1, help="nginx worker processes (diffcastd has one loop)")
    parser.add_argument(
        "--nchan-buffer",
        type=int,
        default=0,
        help="nchan_message_buffer_length (0: M, every message; a shorter buffer loses messages for lagging subscribers)",
    )
    parser.add_argument(
        "--clients", type=int, default=1, help="node processes the subscribers are spread over (one reads 1,000 easily)"
    )
    parser.add_argument(
        "--retries", type=int, default=2, help="runs again of a run in which a subscriber missed messages (noted)"
    )
    parser.add_argument(
        "--events",
        choices=("compact", "full"),
        default="compact",
        help="the form Diffcast's subscribers ask for (compact: as the JavaScript client does, ?compact=1)",
    )
    parser.add_argument(
        "--baseline-diffcastd",
        help="another diffcastd build (an earlier commit's) measured in the same rounds, its subscribers "
        "asking for --baseline-events",
    )
    parser.add_argument("--baseline-events", choices=("compact", "full"), default="full")
    parser.add_argument("--verbose", action="store_true", help="every run's figures on stderr")
    parser.add_argument("--stall", type=float, default=10, help="seconds without a delivery that fail a run")
    args = parser.parse_args()

    for path, what in ((args.diffcastd, "diffcastd"), (args.nginx, "nginx"), (args.nchan_module, "the nchan module")):
        if not os.path.exists(path):
            sys.exit(f"bench_web: {what} not found at {path}")
    # With the Nchan module loaded, nginx makes its compiled-in temporary directories (Debian:
    # /var/lib/nginx/body, ...) whatever the configuration says, and fails to start when it
    # cannot; nothing else makes them on a fresh machine (`make bench-web` does, as root).
    configure = subprocess.run([args.nginx, "-V"], capture_output=True, text=True).stderr
    missing = [
        option.split("=", 1)[1]
        for option in configure.split()
        if option.startswith("--http-") and option.split("=", 1)[0].endswith("-temp-path")
        and not os.path.isdir(option.split("=", 1)[1])
    ]
    if missing:
        sys.exit(f"bench_web: nginx needs these directories; create them first (as root): {' '.join(missing)}")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    directory = tempfile.mkdtemp(prefix="dc-web-")
    diffcast = Diffcast(os.path.abspath(args.diffcastd), directory, compact=args.events == "compact")
    baseline = (
        Diffcast(
            os.path.abspath(args.baseline_diffcastd), directory, "diffcastd (baseline)", args.baseline_events == "compact"
        )
        if args.baseline_diffcastd
        else None
    )
    nchan = Nchan(args.nginx, args.nchan_module, directory, args.nginx_workers, args.nchan_buffer)
    nats = Nats(args.nats_server, directory) if args.nats_server and os.path.exists(args.nats_server) else None
    counts = [int(value) for value in args.subscribers.split(",")]
    windows = [int(value) for value in args.windows.split(",")]
    names = {"sse": "Server-Sent Events", "ws": "WebSocket"}
    try:
        node_version = subprocess.run([args.node, "--version"], capture_output=True, text=True).stdout.strip()
        nginx_version = subprocess.run([args.nginx, "-v"], capture_output=True, text=True).stderr.strip()
        nats_version = (
            subprocess.run([nats.binary, "--version"], capture_output=True, text=True).stdout.strip() if nats else ""
        )
        print(
            f"## Browser transports: the growing feed against {nginx_version.split(': ')[-1]} + Nchan\n\n"
            f"One publisher on the server's Unix socket (diffcastd: `append_items` lines; Nchan: HTTP/1.1\n"
            f"POSTs, pipelined on one keep-alive connection), ~{args.bytes}-byte items, one per write, at most\n"
            f"`window` unanswered; S subscribers read by {args.clients} node {node_version} process(es), the same code for\n"
            f"every server; nginx runs {args.nginx_workers} worker (diffcastd: one loop). Median of {args.rounds} alternated rounds;\n"
            f"every subscriber verified (all M items, the last one last). Latency: from a write's send to\n"
            f"the read that completed its event. CPU: % of one core over the run (client: its reading\n"
            f"thread; 100 % would make it the bottleneck).\n",
            flush=True,
        )
        if nats and "ws" in args.transports.split(","):
            print(
                f"The WebSocket table adds {nats_version.replace('nats-server: ', 'nats-server ')} with its own WebSocket listener (`websocket {{ no_tls: true }}`):\n"
                f"subscribers send `CONNECT`, `SUB feed 1` over WebSocket and count the items in its `MSG`\n"
                f"payloads (taken out of the frames, which need not end between messages). It has no Unix socket:\n"
                f"the publisher writes core NATS `PUB feed N` on its TCP client port (loopback), each followed by\n"
                f"a `PING`. Core NATS answers no PUB; the `PONG` (sent once the server has handled the PUBs before\n"
                f"it, i.e. queued the message for every subscriber) stands for the answer, so `window` counts\n"
                f"unanswered PINGs. That is not an acknowledgement that the message is stored: core NATS keeps\n"
                f"nothing (no snapshot, no replay), where diffcastd answers once the write is applied. nats-server\n"
                f"runs its goroutines on every core (GOMAXPROCS), so its CPU may pass 100 %.\n",
                flush=True,
            )
        for transport in args.transports.split(","):
            print(f"### {names[transport]}\n")
            print(
                "| server | window | subscribers | messages | events per subscriber | deliveries/s "
                "| p50 latency (ms) | p99 latency (ms) | server CPU (%) | server CPU per delivery (µs) "
                "| client CPU (%) | publisher CPU (%) | bytes per delivery |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            ratios = []
            notes = []
            for window in windows:
                for subscribers in counts:
                    deliveries = args.lone_deliveries if window == 1 else args.deliveries
                    messages = args.messages or max(100, deliveries // subscribers)
                    servers = (
                        [diffcast, nchan]
                        + ([nats] if nats and transport == "ws" else [])
                        + ([baseline] if baseline else [])
                    )
                    results = {server.name: [] for server in servers}
                    for round in range(args.rounds):
                        # Alternated: each server first in turn.
                        order = servers[round % len(servers) :] + servers[: round % len(servers)]
                        for server in order:
                            for attempt in range(args.retries + 1):
                                try:
                                    result = trial(server, transport, subscribers, messages, window, args, directory)
                                    break
                                except Incomplete as error:
                                    if attempt == args.retries:
                                        raise
                                    notes.append(f"- run again: {str(error).splitlines()[0]}")
                            results[server.name].append(result)
                    for server in servers:
                        rows = results[server.name]
                        print(
                            f"| {server.name} | {window} | {subscribers} | {messages} | {median(rows, 'events'):.0f} "
                            f"| {median(rows, 'deliveriesPerSecond'):,.0f} | {median(rows, 'p50'):.2f} "
                            f"| {median(rows, 'p99'):.2f} | {median(rows, 'serverPercent'):.0f} "
                            f"| {median(rows, 'serverMicroseconds'):.2f} | {median(rows, 'clientPercent'):.0f} "
                            f"| {median(rows, 'publisherPercent'):.0f} | {median(rows, 'bytes'):.0f} |",
                            flush=True,
                        )
                    ours = results[diffcast.name]
                    for other in servers[1:]:
                        theirs = results[other.name]
                        per_round = ", ".join(
                            f"{a['deliveriesPerSecond'] / b['deliveriesPerSecond']:.2f}×" for a, b in zip(ours, theirs)
                        )
                        ratios.append(
                            f"- vs {other.name}, window {window}, {subscribers} subscribers: deliveries/s "
                            f"{median(ours, 'deliveriesPerSecond') / median(theirs, 'deliveriesPerSecond'):.2f}× "
                            f"(rounds: {per_round}), p50 latency {median(ours, 'p50') / median(theirs, 'p50'):.2f}×, "
                            f"p99 latency {median(ours, 'p99') / median(theirs, 'p99'):.2f}×, server CPU per delivery "
                            f"{median(ours, 'serverMicroseconds') / median(theirs, 'serverMicroseconds'):.2f}×"
                        )
            others = (
                "nginx + Nchan"
                + (", nats-server" if nats and transport == "ws" else "")
                + (" and the baseline diffcastd" if baseline else "")
            )
            print(f"\nRatio diffcastd / {others} ({names[transport]}; of the medians, then per round):\n")
            print("\n".join(ratios) + "\n", flush=True)
            if notes:
                print("Runs in which a subscriber missed messages (not counted):\n")
                print("\n".join(notes) + "\n", flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as error:
        sys.exit(f"bench_web: {error}")
