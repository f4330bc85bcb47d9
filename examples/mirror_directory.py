#!/usr/bin/env python3
"""Keeps the collection DIRECTORY's listing in sync with a folder: one section per
subfolder level, one item per file with its size and modification time. Only what changed
goes out to subscribers: the daemon diffs each listing against the last.

    mirror_directory.py ~/Downloads downloads            # every 2 seconds, until stopped
    mirror_directory.py ~/Downloads downloads --once
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from diffcast import Client  # noqa: E402


def listing(root):
    sections = {}
    for folder, _, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                info = os.stat(path)
            except FileNotFoundError:
                continue
            item = {"id": os.path.join(relative, name), "data": {"bytes": info.st_size, "modified": int(info.st_mtime)}}
            sections.setdefault(relative, []).append(item)
    return [{"id": folder, "items": items} for folder, items in sorted(sections.items())]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("collection")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--once", action="store_true")
    arguments = parser.parse_args()
    with Client() as client:
        last = None
        while True:
            current = listing(arguments.folder)
            if current != last:
                version = client.apply(arguments.collection, current)
                print("version %d: %d files" % (version, sum(len(s["items"]) for s in current)), flush=True)
                last = current
            if arguments.once:
                return
            time.sleep(arguments.interval)


if __name__ == "__main__":
    main()
