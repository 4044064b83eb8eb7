"""Regular reference entries decoded column-wise: keys to chunks, URLs to ids, manifest columns.

A window's regular entries (see `json_window`) are decoded all at once. The last 16 bytes of
each key give its chunk index (``path/i.j.k``) and the position of the ``/`` before it; equal
array paths and equal URLs are grouped (`group_spans`); chunk numbers, URL ids, offsets and
lengths are then scattered into the manifest columns of their array. Entries this cannot
decode (an unusual key, a path that is not a ``.``-separated array) are handed back as Python
values for the per-entry path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refzarr.formats.kerchunk_json.byte_words import (
    I64,
    TOP_MASK,
    U64,
    ZEROS,
    Bytes,
    Mask,
    Unhandled,
    byte_flags,
    group_spans,
    nondigit_flags,
    string_value,
    swar_value,
    tail_byte,
    top_run,
)
from refzarr.formats.kerchunk_json.chunks import ArrayColumns
from refzarr.formats.kerchunk_json.window import Window
from refzarr.model.manifest import WHOLE_FILE

__all__ = ["BulkDecoder", "Decoded", "Slot", "UrlTable"]

_SLASH, _DOT, _BACKSLASH = 0x2F, 0x2E, 0x5C
_DEFER, _OTHER = -1, -2
"""Row tags besides a slot number: decide once the hierarchy is known, per-entry path."""
_TAIL = 16
"""Bytes of a key read column-wise: longer chunk indices take the per-entry path."""


@dataclass
class Slot:
    """An array of the hierarchy: its chunk grid, key separator and manifest columns."""

    path: str
    grid: tuple[int, ...]
    separator: str
    number: int
    columns: ArrayColumns = field(init=False)

    def __post_init__(self) -> None:
        self.columns = ArrayColumns(self.grid)

    @property
    def fast(self) -> bool:
        """True when its chunk keys are ``path/i.j.k`` (decoded column-wise)."""
        return self.separator == "." and len(self.grid) > 0


class UrlTable:
    """Every URL met, numbered: raw JSON string bytes (regular entries) or decoded text.

    ``first_key[i]`` is the ``(open, close)`` quote positions of the first key using URL ``i``
    as raw bytes, or ``None`` for decoded URLs.
    """

    def __init__(self) -> None:
        self.ids: dict[bytes | str, int] = {}
        self.urls: list[bytes | str] = []
        self.first_key: list[tuple[int, int] | None] = []

    def add(self, url: bytes | str, first_key: tuple[int, int] | None = None) -> int:
        """The id of ``url``, numbering it when new."""
        found = self.ids.get(url)
        if found is None:
            found = self.ids[url] = len(self.urls)
            self.urls.append(url)
            self.first_key.append(first_key)
        return found


@dataclass
class Decoded:
    """What the per-entry path must handle after one call of `BulkDecoder.decode`."""

    deferred: I64 = field(default_factory=lambda: np.zeros(0, np.int64))
    """Keys (string numbers) whose array was not known yet: decode them again later."""
    entries: list[tuple[int, str, list[Any], int]] = field(default_factory=list)
    """``(key position, key, reference, URL-table id)`` of entries the columns did not take."""


@dataclass
class _Keys:
    """The keys of a batch: quote positions, last 16 bytes, and where the array path ends."""

    start: I64
    end: I64
    hi: U64
    lo: U64
    slash: I64
    path_end: I64
    ok: Mask


class BulkDecoder:
    """Decodes the regular entries of windows into the `ArrayColumns` of their arrays."""

    def __init__(self, doc: Bytes, urls: UrlTable) -> None:
        self.doc = doc
        self.urls = urls

    def decode(
        self, window: Window, keys: I64, slots: Mapping[str, Slot], *, final: bool = False
    ) -> Decoded:
        """Decode the entries whose key is string ``keys[r]`` of ``window``.

        An entry whose array is not (yet) in ``slots`` is deferred, unless ``final``.
        """
        url_ids = self._url_ids(window, keys)
        batch = self._keys(window, keys)
        tags = self._tags(batch, slots, final)
        by_number = {slot.number: slot for slot in slots.values()}
        for number, rows in _groups(tags):
            failed = self._scatter(window, keys, batch, rows, url_ids, by_number[number])
            tags[failed] = _OTHER
        result = Decoded(deferred=keys[tags == _DEFER])
        for row in np.flatnonzero(tags == _OTHER).tolist():
            position, key, value = self._entry(window, int(keys[row]))
            result.entries.append((position, key, value, int(url_ids[row])))
        return result

    def _url_ids(self, window: Window, keys: I64) -> I64:
        """Table ids of the URLs (string ``key + 1``) of the entries."""
        opens, closes = window.opens[keys + 1], window.closes[keys + 1]
        codes, first = group_spans(self.doc, opens + 1, closes - opens - 1)
        ids = np.empty(first.shape[0] + 1, np.int64)
        for code, row in enumerate(first.tolist()):
            ids[code] = self._add_url(window, keys, opens, closes, row)
        out = ids[codes]
        for row in np.flatnonzero(codes < 0).tolist():
            out[row] = self._add_url(window, keys, opens, closes, row)
        return out

    def _add_url(self, window: Window, keys: I64, opens: I64, closes: I64, row: int) -> int:
        key = int(keys[row])
        first_key = (int(window.opens[key]), int(window.closes[key]))
        return self.urls.add(self.doc.data[int(opens[row]) + 1 : int(closes[row])], first_key)

    def _keys(self, window: Window, keys: I64) -> _Keys:
        """Find each key's last ``/`` (before its ``[0-9.]`` tail) and its path's end."""
        doc = self.doc
        start, end = window.opens[keys], window.closes[keys]
        hi, lo = doc.words(end - 8), doc.words(end - 16)
        run = top_run(nondigit_flags(hi ^ ZEROS) & ~byte_flags(hi, _DOT))
        if (run == 8).any():
            low = top_run(nondigit_flags(lo ^ ZEROS) & ~byte_flags(lo, _DOT))
            run = np.where(run == 8, 8 + low, run)
        slash = end - run - 1
        ok = (run >= 1) & (run <= _TAIL - 3)
        back = np.minimum(run, _TAIL - 3)
        ok &= tail_byte(hi, lo, back + 1) == _SLASH
        escaped = tail_byte(hi, lo, back + 2) == _BACKSLASH
        ok &= ~(escaped & (tail_byte(hi, lo, back + 3) == _BACKSLASH))
        path_end = slash - escaped
        ok &= path_end > start + 1
        return _Keys(start, end, hi, lo, slash, path_end, ok)

    def _tags(self, batch: _Keys, slots: Mapping[str, Slot], final: bool) -> I64:
        """Per entry: the slot number of its array path, or `_DEFER` / `_OTHER`."""
        rows = np.flatnonzero(batch.ok)
        start = batch.start[rows] + 1
        codes, first = group_spans(self.doc, start, batch.path_end[rows] - start)
        by_code = np.empty(first.shape[0] + 1, np.int64)
        by_code[-1] = _OTHER
        for code, row in enumerate(rows[first].tolist()):
            raw = self.doc.data[int(batch.start[row]) + 1 : int(batch.path_end[row])]
            by_code[code] = _tag(string_value(b'"' + raw + b'"'), slots, final)
        tags = np.full(batch.ok.shape[0], _OTHER, np.int64)
        tags[rows] = by_code[codes]
        return tags

    def _scatter(
        self,
        window: Window,
        keys: I64,
        batch: _Keys,
        rows: I64 | None,
        url_ids: I64,
        slot: Slot,
    ) -> I64:
        """Put the entries ``rows`` (None: all) of one array in its columns.

        Returns the rows whose chunk index did not parse.
        """
        pick = slice(None) if rows is None else rows
        flat, ok, outside = _chunk_numbers(batch.hi[pick], batch.lo[pick], slot.grid)
        if (ok & outside).any():
            raise Unhandled("a chunk lies outside the grid")
        index = np.arange(keys.shape[0]) if rows is None else rows
        failed = index[~ok]
        if rows is None and not failed.shape[0]:
            picked, ids = keys, url_ids
        else:
            flat, index = flat[ok], index[ok]
            picked, ids = keys[index], url_ids[index]
        offsets, lengths = window.offset[picked], window.length[picked]
        slot.columns.put(flat.astype(np.int64), ids, offsets, lengths)
        return failed

    def _entry(self, window: Window, key: int) -> tuple[int, str, list[Any]]:
        """One regular entry as Python values, for the per-entry path."""
        data = self.doc.data
        key_open, key_close = int(window.opens[key]), int(window.closes[key])
        url_open, url_close = int(window.opens[key + 1]), int(window.closes[key + 1])
        url = string_value(data[url_open : url_close + 1])
        length = int(window.length[key])
        value = [url] if length == int(WHOLE_FILE) else [url, int(window.offset[key]), length]
        return key_open, string_value(data[key_open : key_close + 1]), value


def _chunk_numbers(hi: U64, lo: U64, grid: tuple[int, ...]) -> tuple[U64, Mask, Mask]:
    """C-order chunk numbers of ``/i.j.k`` tails (the 16 bytes ``lo`` then ``hi``).

    Returns the numbers, whether the tail parsed (one to 15 digits per part, ``.`` between
    parts, ``/`` before the first), and whether a part lies outside ``grid``.
    """
    strides = [math.prod(grid[k + 1 :]) for k in range(len(grid))]
    high, low = hi ^ ZEROS, lo ^ ZEROS
    flat = np.zeros(hi.shape, np.uint64)
    ok = np.ones(hi.shape, np.bool_)
    outside = np.zeros(hi.shape, np.bool_)
    for k in reversed(range(len(grid))):
        count = top_run(nondigit_flags(high))
        value = swar_value(high & _top_mask(count))
        if (count == 8).any():
            more = top_run(nondigit_flags(low))
            value += swar_value(low & _top_mask(np.where(count == 8, more, 0))) * np.uint64(1e8)
            count = np.where(count == 8, 8 + more, count)
        separator = tail_byte(high, low, np.minimum(count + 1, _TAIL))
        ok &= (count >= 1) & (count < _TAIL) & (separator == ((_DOT if k else _SLASH) ^ 0x30))
        outside |= value >= np.uint64(grid[k])
        flat += value * np.uint64(strides[k])
        if k:
            high, low = _drop_tail(high, low, count + 1)
    return flat, ok, outside


def _top_mask(count: I64) -> U64:
    mask: U64 = TOP_MASK[np.clip(count, 0, 8)]
    return mask


def _drop_tail(high: U64, low: U64, count: I64) -> tuple[U64, U64]:
    """Shift the 16 bytes ``low`` then ``high`` up by ``count`` bytes (zeros come in below)."""
    bits = (8 * count).astype(np.uint64)
    rest = (64 - 8 * count).astype(np.uint64)  # wraps past 64: a shift that large gives 0
    over = (8 * count - 64).astype(np.uint64)
    return (high << bits) | (low >> rest) | (low << over), low << bits


def _groups(tags: I64) -> list[tuple[int, I64 | None]]:
    """The slot numbers among ``tags`` with their rows (None: every row has that number)."""
    if tags.shape[0] == 0:
        return []
    low, high = int(tags.min()), int(tags.max())
    if low == high:
        return [(low, None)] if low >= 0 else []
    numbers = np.unique(tags[tags >= 0]).tolist()
    return [(number, np.flatnonzero(tags == number)) for number in numbers]


def _tag(path: str, slots: Mapping[str, Slot], final: bool) -> int:
    slot = slots.get(path)
    if slot is not None:
        return slot.number if slot.fast else _OTHER
    if final or _inside_array(path, slots):
        return _OTHER  # e.g. "a/0" of "a/0/1", a key of the "/"-separated array "a"
    return _DEFER


def _inside_array(path: str, slots: Mapping[str, Slot]) -> bool:
    """Whether an ancestor of ``path`` is an array (so that ``path`` can never be one)."""
    while "/" in path:
        path = path.rpartition("/")[0]
        if path in slots:
            return True
    return False
