"""Inclusive instruction counts of named functions, read from `callgrind_annotate --inclusive=yes`
output (scripts/callgrind.sh writes it). Used by scripts/instructions.sh and
scripts/instructions-fanout.sh."""

import re


def counts(path, rows):
    """{row name: inclusive count} for each (row name, a fragment of the function's line) in rows:
    the first line holding the fragment; "PROGRAM TOTALS" is the whole program."""
    found = {}
    for line in open(path):
        match = re.match(r"\s*([\d,]+) \(", line)
        if not match:
            continue
        for name, fragment in rows:
            if fragment in line and name not in found:
                found[name] = int(match.group(1).replace(",", ""))
    return found
