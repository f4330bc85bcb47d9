"""A Unix socket whose every connection is a WebSocket to the daemon's /v1/ws: each line a
client writes goes out as one text message, each message comes back as one line. With it,
tools that speak the socket protocol (check.py) drive the WebSocket transport unchanged.

    python3 ws_bridge.py SOCKET ws://127.0.0.1:PORT/v1/ws
"""
import os
import socket
import sys
import threading

import websocket  # websocket-client (PyPI)


def bridge(client, url):
    try:
        remote = websocket.create_connection(url, timeout=None)
    except Exception as error:  # the daemon refused the handshake
        client.sendall(('{"bridge_error":%r}\n' % str(error)).encode())
        client.close()
        return

    def upstream():
        reader = client.makefile("rb")
        try:
            for line in reader:
                remote.send(line.rstrip(b"\n").decode("utf-8", "replace"))
        except OSError:
            pass
        try:
            remote.close()
        except Exception:
            pass

    threading.Thread(target=upstream, daemon=True).start()
    try:
        while True:
            message = remote.recv()
            if not message:
                break
            client.sendall(message.encode() + b"\n")
    except Exception:
        pass
    finally:
        client.close()


def main(path, url):
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=bridge, args=(client, url), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
