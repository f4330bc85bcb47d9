#!/usr/bin/env python3
"""Prints every change of a collection as it happens, from a mirror verified on every version.

    print_changes.py COLLECTION [--count N]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from diffcast import Client  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("collection")
    parser.add_argument("--count", type=int, help="stop after this many events")
    arguments = parser.parse_args()
    with Client() as client:
        for seen, (event, mirror) in enumerate(client.follow(arguments.collection), start=1):
            if event["event"] == "snapshot":
                print("v%d: %d items" % (mirror.version, sum(len(items) for _, items in mirror.items())))
            else:
                items = event.get("items", {})
                for entry in items.get("inserted", []):
                    print("v%d + %s %s" % (mirror.version, entry["id"], entry.get("data")))
                for entry in items.get("updated", []):
                    print("v%d ~ %s %s" % (mirror.version, entry["id"], entry.get("data")))
                for entry in items.get("deleted", []):
                    print("v%d - %s" % (mirror.version, entry["id"]))
                for entry in items.get("moved", []):
                    print("v%d ↕ %s %s→%s" % (mirror.version, entry["id"], entry["from"], entry["to"]))
            sys.stdout.flush()
            if arguments.count and seen >= arguments.count:
                return


if __name__ == "__main__":
    main()
