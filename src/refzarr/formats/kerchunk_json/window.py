"""One window of a JSON document: its strings, and which of them start a regular reference entry.

A *regular* entry is ``"key": ["url", offset, length],`` (or ``"key": ["url"],``) followed by
the next key, written with exactly the whitespace most entries of the window use (the window's
layout, learnt from a sample). Such entries are recognised and their two integers parsed for
all strings of the window at once; everything else is left to the per-entry walker.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from refzarr.formats.kerchunk_json.byte_words import (
    I64,
    U64,
    Bytes,
    Unhandled,
    match_pattern,
    parse_number,
    trail_number,
)
from refzarr.model.manifest import MAX_OFFSET, WHOLE_FILE

__all__ = ["Window"]

_WS = rb"[ \t\n\r]*"
_NUMBER = rb"(?:0|[1-9][0-9]*)"
_KEY_GAP = re.compile(_WS + rb":" + _WS + rb"\[" + _WS)
_REF_GAP = re.compile(
    rb"(" + _WS + rb"," + _WS + rb")" + _NUMBER + rb"(" + _WS + rb"," + _WS + rb")" + _NUMBER
    + rb"(" + _WS + rb"\]" + _WS + rb"," + _WS + rb")"
)  # fmt: skip
_WHOLE_GAP = re.compile(_WS + rb"\]" + _WS + rb"," + _WS)
_QUOTE, _BACKSLASH = 0x22, 0x5C
_MAX = np.uint64(MAX_OFFSET)
_FIRST_PROBES, _SPREAD_PROBES, _MAX_GAP = 16, 48, 256


@dataclass(frozen=True)
class _RangeLayout:
    """Whitespace of ``"key"<key_gap>"url"<before>OFFSET<between>LENGTH<after>"next key"``."""

    key_gap: bytes
    before: bytes
    between: bytes
    after: bytes


@dataclass(frozen=True)
class _WholeLayout:
    """Whitespace of ``"key"<key_gap>"url"<after>"next key"`` (a whole-file reference)."""

    key_gap: bytes
    after: bytes


class Window:
    """Strings starting in ``[start, stop)`` and the regular entries among them.

    ``opens[i]`` / ``closes[i]`` are the positions of string ``i``'s quotes. Strings
    ``0 .. resolved - 1`` are analysed: ``regular[i]`` says string ``i`` is the key of a
    regular entry, whose URL is string ``i + 1`` and whose range is ``offset[i]``,
    ``length[i]`` (``WHOLE_FILE`` for ``["url"]``).
    """

    def __init__(self, doc: Bytes, start: int, size: int) -> None:
        self.start, self.size = start, size
        opens, closes, at_end = _strings(doc, start, size)
        self.opens, self.closes = np.ascontiguousarray(opens), np.ascontiguousarray(closes)
        n = self.opens.shape[0]
        self.resolved = n if at_end else max(n - 2, 0)
        self.regular = np.zeros(n, np.bool_)
        self.offset = np.zeros(n, np.uint64)
        self.length = np.zeros(n, np.uint64)
        self._classify(doc, min(self.resolved, n - 2))
        bad = ~self.regular
        self._bad = (np.flatnonzero(bad[0::2]) * 2, np.flatnonzero(bad[1::2]) * 2 + 1)

    def index_of(self, pos: int) -> int | None:
        """The analysed string opening at ``pos``, or None when this window cannot tell."""
        si = int(np.searchsorted(self.opens, pos))
        if si < self.resolved and int(self.opens[si]) == pos:
            return si
        return None

    def run_end(self, si: int) -> int:
        """The first string after ``si`` (same parity) that does not start a regular entry."""
        bad = self._bad[si % 2]
        return int(bad[np.searchsorted(bad, si)])

    def _classify(self, doc: Bytes, limit: int) -> None:
        if limit <= 0:
            return
        ranges, wholes = _probe(doc, self.opens, self.closes, limit)
        for layout in ranges:
            rows, offset, length = _range_entries(doc, self.opens, self.closes, limit, layout)
            self.regular[rows] = True
            self.offset[rows] = offset
            self.length[rows] = length
        for whole in wholes:
            rows = _whole_entries(doc, self.opens, self.closes, limit, whole)
            self.regular[rows] = True
            self.length[rows] = WHOLE_FILE


def _strings(doc: Bytes, start: int, size: int) -> tuple[I64, I64, bool]:
    """Open and close quote positions of the strings starting from ``start``.

    The window grows until it holds at least three strings or reaches the end.
    """
    while True:
        stop = min(doc.size, start + size)
        at_end = stop == doc.size
        quotes = _unescaped(doc, np.flatnonzero(doc.u8[start:stop] == _QUOTE) + start)
        if quotes.shape[0] % 2:
            if at_end:
                raise Unhandled("unterminated string")
            quotes = quotes[:-1]
        if quotes.shape[0] >= 6 or at_end:
            return quotes[0::2], quotes[1::2], at_end
        size *= 4


def _unescaped(doc: Bytes, quotes: I64) -> I64:
    """Drop quotes escaped by an odd run of backslashes."""
    suspects = quotes[(quotes > 0) & (doc.u8[np.maximum(quotes - 1, 0)] == _BACKSLASH)]
    if suspects.shape[0] == 0:
        return quotes
    run = np.ones(suspects.shape[0], np.int64)
    growing = np.ones(suspects.shape[0], np.bool_)
    while growing.any():
        before = suspects - run - 1
        growing &= (before >= 0) & (doc.u8[np.maximum(before, 0)] == _BACKSLASH)
        run += growing
    escaped = suspects[run % 2 == 1]
    # both sorted, ``escaped`` drawn from ``quotes``: their places found by bisection (np.isin
    # hashes both: ~0.3 s for a record of sources of 20,000 files in a root .zattrs text)
    keep = np.ones(quotes.shape[0], np.bool_)
    keep[np.searchsorted(quotes, escaped)] = False
    return quotes[keep]


def _probe(
    doc: Bytes, opens: I64, closes: I64, limit: int
) -> tuple[list[_RangeLayout], list[_WholeLayout]]:
    """The most common layouts of regular entries among a sample of the window's strings."""
    spread = np.linspace(0, limit - 1, _SPREAD_PROBES).astype(np.int64).tolist()
    sample = sorted(set(range(min(_FIRST_PROBES, limit))) | set(spread))
    ranges: Counter[_RangeLayout] = Counter()
    wholes: Counter[_WholeLayout] = Counter()
    data = doc.data
    for i in sample:
        key_gap = data[int(closes[i]) + 1 : int(opens[i + 1])]
        tail = data[int(closes[i + 1]) + 1 : int(opens[i + 2])]
        if len(key_gap) > _MAX_GAP or len(tail) > _MAX_GAP or not _KEY_GAP.fullmatch(key_gap):
            continue
        found = _REF_GAP.fullmatch(tail)
        if found:
            ranges[_RangeLayout(key_gap, found[1], found[2], found[3])] += 1
        elif _WHOLE_GAP.fullmatch(tail):
            wholes[_WholeLayout(key_gap, tail)] += 1
    return [k for k, _ in ranges.most_common(1)], [k for k, _ in wholes.most_common(1)]


def _key_candidates(doc: Bytes, opens: I64, closes: I64, limit: int, key_gap: bytes) -> I64:
    """Strings followed by exactly ``key_gap`` and another string."""
    i = np.flatnonzero(opens[1 : limit + 1] - closes[:limit] == len(key_gap) + 1)
    found: I64 = i[match_pattern(doc, closes[i] + 1, key_gap)]
    return found


def _range_entries(
    doc: Bytes, opens: I64, closes: I64, limit: int, layout: _RangeLayout
) -> tuple[I64, U64, U64]:
    """Keys of ``"key": ["url", offset, length],`` entries, with their offsets and lengths.

    The length is anchored by the next key, so it is read backwards first; then the offset.
    """
    i = _key_candidates(doc, opens, closes, limit, layout.key_gap)
    url_open, url_close = opens[i + 1], closes[i + 1]
    second_end = opens[i + 2] - len(layout.after)
    ok = (url_close - url_open > 1) & match_pattern(doc, url_close + 1, layout.before)
    ok &= match_pattern(doc, second_end, layout.after)
    length, count, ok_length = trail_number(doc, second_end)
    first_end = second_end - count - len(layout.between)
    ok &= ok_length & match_pattern(doc, first_end, layout.between)
    first_start = url_close + 1 + len(layout.before)
    offset, ok_offset = parse_number(doc, first_end, first_end - first_start)
    ok &= ok_offset & (offset <= _MAX) & (length <= _MAX)
    return i[ok], offset[ok], length[ok]


def _whole_entries(doc: Bytes, opens: I64, closes: I64, limit: int, layout: _WholeLayout) -> I64:
    """Keys of ``"key": ["url"],`` entries."""
    i = _key_candidates(doc, opens, closes, limit, layout.key_gap)
    url_open, url_close = opens[i + 1], closes[i + 1]
    ok = (url_close - url_open > 1) & (opens[i + 2] - url_close - 1 == len(layout.after))
    ok &= match_pattern(doc, url_close + 1, layout.after)
    found: I64 = i[ok]
    return found
