"""scripts/mutate.sh names each mutant by the exact text it replaces in a file. A mutant whose text
has moved (a file split, a line reformatted) mutates nothing, and its run proves nothing: every
mutant's text occurs exactly once in its file, and its replacement differs from it."""

import re

from conftest import REPOSITORY


def mutants():
    script = (REPOSITORY / "scripts" / "mutate.sh").read_text()
    block = script.split("mutants=$(cat <<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    for line in block.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, path, old, new, *killers = line.split("|")
        yield name, path, old.replace("\\n", "\n"), new.replace("\\n", "\n"), killers


def test_every_mutant_names_text_that_is_there_once():
    listed = list(mutants())
    assert len(listed) > 150, len(listed)
    names = [name for name, *_ in listed]
    assert len(names) == len(set(names)), "two mutants share a name"
    stale = []
    for name, path, old, new, killers in listed:
        assert re.fullmatch(r"[a-z0-9-]+", name), name
        assert old != new and killers, name
        count = (REPOSITORY / path).read_text().count(old) if (REPOSITORY / path).exists() else 0
        if count != 1:
            stale.append(f"{name}: {count} times in {path}")
    assert stale == [], stale
