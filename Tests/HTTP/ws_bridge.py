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
        # The daemon's frames are checked by the client reading the lines; validating UTF-8 in
        # pure Python here would make the bridge the slowest part of every test.
        remote = websocket.create_connection(url, timeout=None, enable_multithread=True,
                                             skip_utf8_validation=True)
    except Exception as error:  # the daemon refused the handshake
        client.sendall(('{"bridge_error":%r}\n' % str(error)).encode())
        client.close()
        return

    def upstream():
        # What the client writes at once goes out at once, as one write of frames: pipelined
        # requests reach the daemon together, as they would over the socket.
        pending = b""
        try:
            while True:
                chunk = client.recv(1 << 16)
                if not chunk:
                    break
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                frames = b"".join(
                    websocket.ABNF.create_frame(line.decode("utf-8", "replace"), websocket.ABNF.OPCODE_TEXT).format()
                    for line in lines)
                with remote.lock:
                    remote.sock.sendall(frames)
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
