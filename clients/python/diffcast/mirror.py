"""A verified local copy of one collection: the protocol's apply algorithm and its digest.

Data is kept as the canonical JSON text the daemon sent (numbers keep their text: ``1.0``
stays ``1.0``), because the digest is computed over that text; ``Item.data`` parses it.
Events come from the network: whatever shape one has, it either applies whole or raises
``Divergence`` and leaves the mirror as it was.
"""

import json
import re
import reprlib

_P = (1 << 61) - 1
_B = 1099511628211
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1
_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")


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
        return json.dumps(value, allow_nan=False)
    if isinstance(value, list):
        return "[" + ",".join(canonical(element) for element in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + canonical(v) for k, v in value.items()) + "}"
    raise TypeError("not a JSON value: %r" % (value,))


def _describe(value):
    """A short rendering of a wire value for a message, whatever its size or depth."""
    try:
        return reprlib.repr(value)
    except ValueError:  # an integer too long to print
        return "<%s>" % type(value).__name__


def _integer(value):
    """A JSON integer of at most 20 digits (RawNumber text) or a Python int, else None."""
    if isinstance(value, RawNumber):
        return int(value) if len(value) <= 21 and _INTEGER.fullmatch(value) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def identifier(value):
    """An identifier's text: strings as they are, integers by their decimal text (``-0`` is ``0``)."""
    if isinstance(value, RawNumber):
        if _INTEGER.fullmatch(value):
            return "0" if value == "-0" else str(value)
    elif isinstance(value, str):
        return value
    elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 3402:
        return str(value)  # at most 1024 digits, as an identifier is at most 1024 bytes
    raise Divergence("bad identifier %s" % _describe(value))


def data_text(value):
    """The canonical text of a data value, None for absent or null."""
    if value is None:
        return None
    try:
        return canonical(value)
    except (TypeError, ValueError, RecursionError):
        raise Divergence("bad data %s" % _describe(value)) from None


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

    Only touched sections are re-hashed, and the identifiers held are kept in sets updated by
    what a changeset lists, so a changeset costs about the sections it touches.

    A windowed subscription's events apply the same way: the mirror then holds the view (its
    digest is the view's), and ``window`` is the last event's window object.
    """

    def __init__(self):
        self.sections = []
        self.version = None
        self.epoch = None
        #: Where a windowed view stands: ``{"offset", "count", "total"}`` (and ``"anchor"``, an
        #: identifier or None, for anchor windows) as of the last event; None for a whole collection.
        self.window = None
        #: Why events did not fit, oldest first (a follower resubscribes after each).
        self.divergences = []
        self._section_ids = set()
        self._item_ids = set()

    def digest(self):
        return hex_digest(digest_of(section.part() for section in self.sections))

    def items(self):
        """The state as plain values: ``[(section id, [(item id, data)…])…]``."""
        return [(s.id, [(i.id, i.data) for i in s.items]) for s in self.sections]

    def feed(self, event):
        """Applies one event (a dict parsed with ``parse_preserving``); returns its kind.

        Raises ``Divergence`` when the event does not fit, whatever is wrong with it; the
        mirror is then unchanged.
        """
        kind = event.get("event") if isinstance(event, dict) else None
        if kind == "dropped":
            self.sections, self.version, self.epoch, self.window = [], None, None, None
            self._section_ids, self._item_ids = set(), set()
            return kind
        if kind == "snapshot":
            version = _version(event, "version")
            epoch = event.get("epoch")
            if not isinstance(epoch, str) or isinstance(epoch, RawNumber):
                raise Divergence("bad epoch %s" % _describe(epoch))
            sections, section_ids, item_ids = _snapshot_sections(event)
        elif kind == "changeset":
            if self.version is None:
                raise Divergence("a changeset before any snapshot")
            # A compact changeset (a page's event stream or WebSocket with ?compact=1) leaves out
            # the `from` and epoch its subscription established: the version held, and the
            # epoch of the last snapshot.
            start = _version(event, "from") if "from" in event else self.version
            version = _version(event, "version")
            if start != self.version:
                raise Divergence("chain broken: changeset from %d but the mirror holds %d" % (start, self.version))
            if version < start:
                raise Divergence("changeset from %d back to %d" % (start, version))
            if event.get("epoch", self.epoch) != self.epoch:
                raise Divergence("changeset of epoch %s, the mirror's is %s" % (_describe(event.get("epoch")), self.epoch))
            if ("window" in event) != (self.window is not None):
                raise Divergence("a %s changeset on a mirror of %s" % (
                    "windowed" if "window" in event else "whole", "a window" if self.window is not None else "a whole collection"))
            epoch = self.epoch
            change = _Change(self.sections, self._section_ids, self._item_ids)
            try:
                change.apply(event)
            except Divergence as divergence:
                raise Divergence("changeset %d->%d does not apply: %s" % (start, version, divergence)) from None
            sections = change.sections
        else:
            raise Divergence("not an event: %s" % _describe(event))
        computed = hex_digest(digest_of(section.part() for section in sections))
        if event.get("digest") != computed:
            raise Divergence("digest %s but the mirror computes %s" % (_describe(event.get("digest")), computed))
        holds = (lambda ident: ident in item_ids) if kind == "snapshot" else change.holds_item
        window = _window_object(event, sum(len(section.items) for section in sections), holds)
        if kind == "snapshot":
            self._section_ids, self._item_ids = section_ids, item_ids
        else:
            change.commit_identifiers()
        self.sections, self.version, self.epoch, self.window = sections, version, epoch, window
        return kind


def _window_object(event, item_count, holds):
    """The event's window object checked against the view it brings (None when it has none):
    ``count`` is the number of items held, within ``total`` from ``offset``, and an anchor is
    one of them (a null anchor shows nothing)."""
    if "window" not in event:
        return None
    raw = event["window"]
    if not isinstance(raw, dict):
        raise Divergence("window is not an object: %s" % _describe(raw))
    window = {}
    for key in ("offset", "count", "total"):
        number = _integer(raw.get(key))
        if number is None or not 0 <= number <= _MASK:
            raise Divergence("bad window.%s %s" % (key, _describe(raw.get(key))))
        window[key] = number
    if window["count"] != item_count:
        raise Divergence("window.count %d but the view holds %d items" % (window["count"], item_count))
    if window["offset"] + window["count"] > window["total"]:
        raise Divergence("window %d+%d goes past its total %d" % (window["offset"], window["count"], window["total"]))
    if "anchor" in raw:
        anchor = None if raw["anchor"] is None else identifier(raw["anchor"])
        if anchor is None and item_count:
            raise Divergence("a window without anchor holds %d items" % item_count)
        if anchor is not None and not holds(anchor):
            raise Divergence("window anchor %r is not in the view" % anchor)
        window["anchor"] = anchor
    return window


def _version(event, key):
    """An unsigned 64-bit version from the event's ``key``."""
    number = _integer(event.get(key))
    if number is None or not 0 <= number <= _MASK:
        raise Divergence("bad %s %s" % (key, _describe(event.get(key))))
    return number


def _entry_list(holder, key, where):
    """``holder[key]`` as a list (empty when absent)."""
    value = holder.get(key, [])
    if not isinstance(value, list):
        raise Divergence("%s.%s is not a list: %s" % (where, key, _describe(value)))
    return value


def _field(entry, key, where):
    """``entry[key]`` of an object listed in ``where``."""
    if not isinstance(entry, dict):
        raise Divergence("an entry of %s is not an object: %s" % (where, _describe(entry)))
    if key not in entry:
        raise Divergence("an entry of %s has no %r: %s" % (where, key, _describe(entry)))
    return entry[key]


def _entry_id(entry, where):
    """The identifier of an object listed in ``where``."""
    return identifier(_field(entry, "id", where))


def _index(entry, key, where):
    """A non-negative index from ``entry[key]``."""
    number = _integer(_field(entry, key, where))
    if number is None or number < 0:
        raise Divergence("bad %s.%s %s" % (where, key, _describe(entry[key])))
    return number


def _path(entry, key, where):
    """A (section, item) pair of non-negative indices from ``entry[key]``."""
    value = _field(entry, key, where)
    if not isinstance(value, list) or len(value) != 2:
        raise Divergence("bad %s.%s %s" % (where, key, _describe(value)))
    pair = tuple(_integer(number) for number in value)
    if None in pair or min(pair) < 0:
        raise Divergence("bad %s.%s %s" % (where, key, _describe(value)))
    return pair


def _snapshot_sections(event):
    """A snapshot's sections, and the sets of its section and item identifiers (each unique)."""
    if not isinstance(event.get("sections"), list):
        raise Divergence("snapshot without a list of sections: %s" % _describe(event.get("sections")))
    sections, section_ids, item_ids = [], set(), set()
    for raw in event["sections"]:
        ident = _entry_id(raw, "sections")
        if ident in section_ids:
            raise Divergence("section %r is listed twice" % ident)
        section_ids.add(ident)
        items = []
        for entry in _entry_list(raw, "items", "section %r" % ident):
            if isinstance(entry, dict):
                item = Item(_entry_id(entry, "items"), data_text(entry.get("data")))
            else:
                item = Item(identifier(entry))
            if item.id in item_ids:
                raise Divergence("item %r is listed twice" % item.id)
            item_ids.add(item.id)
            items.append(item)
        sections.append(Section(ident, data_text(raw.get("data")), items))
    return sections, section_ids, item_ids


def _check_distinct(positions):
    """Two arrivals at one new position do not fit."""
    seen = set()
    for position in positions:
        if position in seen:
            raise Divergence("two arrive at %s" % (position,))
        seen.add(position)


class _Change:
    """One changeset applied with the protocol's five steps to copies of the touched sections.

    The old sections and identifier sets are only read; ``commit_identifiers`` updates the sets
    once the result is accepted.
    """

    def __init__(self, sections, section_ids, item_ids):
        self.sections = list(sections)
        self._fresh = set()  # the sections this change created or copied: safe to edit
        self._section_ids, self._item_ids = section_ids, item_ids
        self._sections_gone, self._sections_added = set(), set()
        self._items_gone, self._items_added = set(), set()

    def holds_item(self, ident):
        """Whether the item is there once the change is applied."""
        return ident in self._items_added or (ident in self._item_ids and ident not in self._items_gone)

    def commit_identifiers(self):
        self._section_ids -= self._sections_gone
        self._section_ids |= self._sections_added
        self._item_ids -= self._items_gone
        self._item_ids |= self._items_added

    def _editable(self, index):
        section = self.sections[index]
        if section not in self._fresh:
            section = self.sections[index] = Section(section.id, section.data_text, list(section.items))
            self._fresh.add(section)
        section.touch()
        return section

    def _section_at(self, index, ident, where):
        if index >= len(self.sections) or self.sections[index].id != ident:
            raise Divergence("%s %d does not hold section %r" % (where, index, ident))
        return self.sections[index]

    def _item_at(self, path, ident, where):
        section_index, index = path
        if section_index >= len(self.sections) or index >= len(self.sections[section_index].items):
            raise Divergence("%s [%d,%d] is out of range" % (where, section_index, index))
        item = self.sections[section_index].items[index]
        if item.id != ident:
            raise Divergence("%s [%d,%d] holds %r, not %r" % (where, section_index, index, item.id, ident))
        return item

    def apply(self, event):
        section_changes = event.get("sections", {})
        item_changes = event.get("items", {})
        for name, changes in (("sections", section_changes), ("items", item_changes)):
            if not isinstance(changes, dict):
                raise Divergence("%s is not an object: %s" % (name, _describe(changes)))
        item_moves = [(_path(e, "from", "items.moved"), _path(e, "to", "items.moved"), _entry_id(e, "items.moved"))
                      for e in _entry_list(item_changes, "moved", "items")]
        section_moves = [(_index(e, "from", "sections.moved"), _index(e, "to", "sections.moved"), _entry_id(e, "sections.moved"))
                         for e in _entry_list(section_changes, "moved", "sections")]
        moved_items = self._take_out_items(item_changes, item_moves)
        moved_sections = self._take_out_sections(section_changes, section_moves)
        self._put_in_sections(section_changes, section_moves, moved_sections)
        self._put_in_items(item_changes, item_moves, moved_items)
        self._set_data_and_check_marks(section_changes, item_changes)

    def _take_out_items(self, item_changes, item_moves):
        """Step 1: items out at old coordinates; returns the moved ones by identifier."""
        deletions = _entry_list(item_changes, "deleted", "items")
        removals = {}
        for entry in deletions:
            path, ident = _path(entry, "at", "items.deleted"), _entry_id(entry, "items.deleted")
            self._item_at(path, ident, "items.deleted")
            removals.setdefault(path[0], set()).add(path[1])
            self._items_gone.add(ident)
        moved = {}
        for origin, _, ident in item_moves:
            moved[ident] = self._item_at(origin, ident, "items.moved from")
            removals.setdefault(origin[0], set()).add(origin[1])
        if sum(map(len, removals.values())) != len(deletions) + len(item_moves):
            raise Divergence("an item is taken out twice")
        for section_index, positions in removals.items():
            section = self._editable(section_index)
            for index in sorted(positions, reverse=True):
                del section.items[index]
        return moved

    def _take_out_sections(self, section_changes, section_moves):
        """Step 2: sections out at old indices; returns the moved ones (with their remaining items)."""
        deletions = _entry_list(section_changes, "deleted", "sections")
        removals = set()
        for entry in deletions:
            index, ident = _index(entry, "index", "sections.deleted"), _entry_id(entry, "sections.deleted")
            section = self._section_at(index, ident, "sections.deleted")
            removals.add(index)
            self._sections_gone.add(ident)
            self._items_gone.update(item.id for item in section.items)
        moved = {}
        for origin, _, ident in section_moves:
            moved[ident] = self._section_at(origin, ident, "sections.moved from")
            removals.add(origin)
        if len(removals) != len(deletions) + len(section_moves):
            raise Divergence("a section is taken out twice")
        for index in sorted(removals, reverse=True):
            del self.sections[index]
        return moved

    def _put_in_sections(self, section_changes, section_moves, moved):
        """Step 3: inserted (empty) and moved sections in at new indices, ascending."""
        arrivals = []
        for entry in _entry_list(section_changes, "inserted", "sections"):
            index, ident = _index(entry, "index", "sections.inserted"), _entry_id(entry, "sections.inserted")
            if ident in self._sections_added or (ident in self._section_ids and ident not in self._sections_gone):
                raise Divergence("section %r is inserted but already there" % ident)
            self._sections_added.add(ident)
            section = Section(ident, data_text(entry.get("data")))
            self._fresh.add(section)
            arrivals.append((index, section))
        arrivals += [(target, moved[ident]) for _, target, ident in section_moves]
        _check_distinct(index for index, _ in arrivals)
        for index, section in sorted(arrivals, key=lambda arrival: arrival[0]):
            if index > len(self.sections):
                raise Divergence("section %r cannot arrive at %d, past the end" % (section.id, index))
            self.sections.insert(index, section)

    def _put_in_items(self, item_changes, item_moves, moved):
        """Step 4: inserted and moved items in at new coordinates, ascending."""
        arrivals = []
        for entry in _entry_list(item_changes, "inserted", "items"):
            path, ident = _path(entry, "at", "items.inserted"), _entry_id(entry, "items.inserted")
            if ident in self._items_added or (ident in self._item_ids and ident not in self._items_gone):
                raise Divergence("item %r is inserted but already there" % ident)
            self._items_added.add(ident)
            arrivals.append((path, Item(ident, data_text(entry.get("data")))))
        arrivals += [(target, moved[ident]) for _, target, ident in item_moves]
        _check_distinct(path for path, _ in arrivals)
        for (section_index, index), item in sorted(arrivals, key=lambda arrival: arrival[0]):
            if section_index >= len(self.sections) or index > len(self.sections[section_index].items):
                raise Divergence("item %r cannot arrive at [%d,%d], past the end" % (item.id, section_index, index))
            self._editable(section_index).items.insert(index, item)

    def _set_data_and_check_marks(self, section_changes, item_changes):
        """Step 5: data from ``updated``; ``reloaded`` must name what is there."""
        for entry in _entry_list(section_changes, "updated", "sections"):
            index, ident = _index(entry, "index", "sections.updated"), _entry_id(entry, "sections.updated")
            self._section_at(index, ident, "sections.updated")
            self._editable(index).data_text = data_text(entry.get("data"))
        for entry in _entry_list(item_changes, "updated", "items"):
            path, ident = _path(entry, "at", "items.updated"), _entry_id(entry, "items.updated")
            self._item_at(path, ident, "items.updated")
            self._editable(path[0]).items[path[1]] = Item(ident, data_text(entry.get("data")))
        where = "sections.reloaded"
        for entry in _entry_list(section_changes, "reloaded", "sections"):
            self._section_at(_index(entry, "index", where), _entry_id(entry, where), where)
        where = "items.reloaded"
        for entry in _entry_list(item_changes, "reloaded", "items"):
            self._item_at(_path(entry, "at", where), _entry_id(entry, where), where)
