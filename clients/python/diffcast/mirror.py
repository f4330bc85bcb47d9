"""A verified local copy of one collection: the protocol's apply algorithm and its digest.

Data is kept as the canonical JSON text the daemon sent (numbers keep their text: ``1.0``
stays ``1.0``), because the digest is computed over that text; ``Item.data`` parses it.
"""

import json

_P = (1 << 61) - 1
_B = 1099511628211
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1


class Divergence(Exception):
    """An event that does not fit the mirror: subscribe again without ``since``."""


class RawNumber(str):
    """A JSON number's text as written."""


def parse_preserving(text):
    """Parses JSON keeping each number's text (as ``RawNumber``), for canonical re-encoding."""
    return json.loads(text, parse_int=RawNumber, parse_float=RawNumber, parse_constant=_reject_constant)


def _reject_constant(name):
    raise ValueError("not JSON: " + name)


def canonical(value):
    """Compact JSON text as the daemon writes it: keys in order, numbers as written."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, RawNumber):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ",".join(canonical(element) for element in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical(v) for k, v in value.items()) + "}"
    raise TypeError("not a JSON value: %r" % (value,))


def identifier(value):
    """An identifier's text: strings as they are, integers by their decimal text (``-0`` is ``0``)."""
    if isinstance(value, RawNumber) or (isinstance(value, int) and not isinstance(value, bool)):
        text = str(value)
        return "0" if text == "-0" else text
    if isinstance(value, str):
        return value
    raise Divergence("bad identifier %r" % (value,))


def data_text(value):
    """The canonical text of a data value, None for absent or null."""
    return None if value is None else canonical(value)


def token_hash(tag, ident, data):
    """64-bit FNV-1a of a token: tag, identifier, newline, data text, newline."""
    h = _FNV_OFFSET
    for byte in (tag + ident + "\n" + (data or "") + "\n").encode("utf-8", "surrogatepass"):
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def digest_of(parts):
    """Folds (value, token count) parts left to right: D(XY) = D(X)·B^|Y| + D(Y) mod P."""
    total = 0
    for value, count in parts:
        total = (total * pow(_B, count, _P) + value) % _P
    return total


def hex_digest(value):
    return "%016x" % value


class Item:
    """An item: its identifier and its data's canonical text."""

    __slots__ = ("id", "data_text", "hash")

    def __init__(self, ident, data_text=None):
        self.id = ident
        self.data_text = data_text
        self.hash = token_hash("I", ident, data_text)

    @property
    def data(self):
        return None if self.data_text is None else json.loads(self.data_text)

    def __repr__(self):
        return "Item(%r, %s)" % (self.id, self.data_text)


class Section:
    """A section: identifier, data text, items, and its cached digest part."""

    __slots__ = ("id", "data_text", "items", "_part")

    def __init__(self, ident, data_text=None, items=None):
        self.id = ident
        self.data_text = data_text
        self.items = items if items is not None else []
        self._part = None

    @property
    def data(self):
        return None if self.data_text is None else json.loads(self.data_text)

    def touch(self):
        self._part = None

    def part(self):
        """(digest value, token count) of the section token and its items."""
        if self._part is None:
            value = token_hash("S", self.id, self.data_text) % _P
            for item in self.items:
                value = (value * _B + item.hash % _P) % _P
            self._part = (value, 1 + len(self.items))
        return self._part


class Mirror:
    """One collection, kept by applying events (``feed``) and checking every digest.

    Only touched sections are re-hashed, so a changeset costs about the sections it touches.
    """

    def __init__(self):
        self.sections = []
        self.version = None
        self.epoch = None
        #: Why events did not fit, oldest first (a follower resubscribes after each).
        self.divergences = []

    def digest(self):
        return hex_digest(digest_of(section.part() for section in self.sections))

    def items(self):
        """The state as plain values: ``[(section id, [(item id, data)…])…]``."""
        return [(s.id, [(i.id, i.data) for i in s.items]) for s in self.sections]

    def feed(self, event):
        """Applies one event (a dict parsed with ``parse_preserving``); returns its kind.

        Raises ``Divergence`` when the event does not fit; the mirror is then unchanged.
        """
        kind = event.get("event")
        if kind == "dropped":
            self.sections, self.version, self.epoch = [], None, None
            return kind
        if kind == "snapshot":
            sections = [_section_from_wire(raw) for raw in event.get("sections", [])]
            epoch = event.get("epoch")
        elif kind == "changeset":
            if self.version is None:
                raise Divergence("a changeset before any snapshot")
            if int(event["from"]) != self.version:
                raise Divergence("chain broken: changeset from %s but the mirror holds %s" % (event["from"], self.version))
            try:
                sections = _apply(self.sections, event)
            except (IndexError, KeyError, TypeError, ValueError) as error:
                raise Divergence("changeset %s->%s does not apply: %r" % (event["from"], event["version"], error))
            epoch = self.epoch
        else:
            raise Divergence("not an event: %r" % (event,))
        computed = hex_digest(digest_of(section.part() for section in sections))
        if event.get("digest") != computed:
            raise Divergence("digest %s but the mirror computes %s" % (event.get("digest"), computed))
        self.sections, self.version, self.epoch = sections, int(event["version"]), epoch
        return kind


def _section_from_wire(raw):
    items = []
    for entry in raw.get("items", []):
        if isinstance(entry, dict):
            items.append(Item(identifier(entry["id"]), data_text(entry.get("data"))))
        else:
            items.append(Item(identifier(entry)))
    return Section(identifier(raw["id"]), data_text(raw.get("data")), items)


def _apply(old_sections, event):
    """The protocol's five steps, on copies of the touched sections only."""
    sections = list(old_sections)
    fresh = set()  # the sections this changeset created or copied (by identity): safe to edit

    def editable(index):
        if id(sections[index]) not in fresh:
            old = sections[index]
            sections[index] = Section(old.id, old.data_text, list(old.items))
            fresh.add(id(sections[index]))
        sections[index].touch()
        return sections[index]

    section_changes = event.get("sections", {})
    item_changes = event.get("items", {})
    # 1. Items out at old coordinates (deleted, and moved ones kept by identifier).
    removals = {}
    for entry in item_changes.get("deleted", []):
        removals.setdefault(int(entry["at"][0]), []).append((int(entry["at"][1]), identifier(entry["id"]), False))
    for entry in item_changes.get("moved", []):
        removals.setdefault(int(entry["from"][0]), []).append((int(entry["from"][1]), identifier(entry["id"]), True))
    moved_items = {}
    for section_index, entries in removals.items():
        section = editable(section_index)
        for index, ident, keep in sorted(entries, reverse=True):
            item = section.items[index]
            if item.id != ident:
                raise ValueError("item %r is not at [%d,%d]" % (ident, section_index, index))
            del section.items[index]
            if keep:
                moved_items[ident] = item
    # 2. Sections out at old indices (moved ones kept with their items).
    outs = [(int(e["index"]), identifier(e["id"]), False) for e in section_changes.get("deleted", [])]
    outs += [(int(e["from"]), identifier(e["id"]), True) for e in section_changes.get("moved", [])]
    moved_sections = {}
    for index, ident, keep in sorted(outs, reverse=True):
        section = sections[index]
        if section.id != ident:
            raise ValueError("section %r is not at %d" % (ident, index))
        del sections[index]
        if keep:
            moved_sections[ident] = section
    # 3. Sections in at new indices, ascending.
    ins = [(int(e["index"]), Section(identifier(e["id"]), data_text(e.get("data")))) for e in section_changes.get("inserted", [])]
    fresh.update(id(section) for _, section in ins)
    ins += [(int(e["to"]), moved_sections.pop(identifier(e["id"]))) for e in section_changes.get("moved", [])]
    for index, section in sorted(ins, key=lambda pair: pair[0]):
        if index > len(sections):
            raise ValueError("section index %d past the end" % index)
        sections.insert(index, section)
    # 4. Items in at new coordinates, ascending.
    places = [(tuple(map(int, e["at"])), Item(identifier(e["id"]), data_text(e.get("data")))) for e in item_changes.get("inserted", [])]
    places += [(tuple(map(int, e["to"])), moved_items.pop(identifier(e["id"]))) for e in item_changes.get("moved", [])]
    for (section_index, index), item in sorted(places, key=lambda pair: pair[0]):
        section = editable(section_index)
        if index > len(section.items):
            raise ValueError("item index [%d,%d] past the end" % (section_index, index))
        section.items.insert(index, item)
    # 5. Data from updates, at new coordinates.
    for entry in section_changes.get("updated", []):
        section = editable(int(entry["index"]))
        if section.id != identifier(entry["id"]):
            raise ValueError("section %r is not at %s" % (entry["id"], entry["index"]))
        section.data_text = data_text(entry.get("data"))
    for entry in item_changes.get("updated", []):
        section_index, index = map(int, entry["at"])
        section = editable(section_index)
        if section.items[index].id != identifier(entry["id"]):
            raise ValueError("item %r is not at %s" % (entry["id"], entry["at"]))
        section.items[index] = Item(section.items[index].id, data_text(entry.get("data")))
    return sections
