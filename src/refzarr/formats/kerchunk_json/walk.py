"""Walks the top-level object (and a Version 1 ``refs`` object) of a JSON reference set.

The walker validates the structure between entries itself and parses every value it meets
with the standard library's decoder, except runs of regular reference entries (see
`json_window`): those it jumps over in one step and hands to its sink as string numbers of a
window. Anything it does not understand raises `Unhandled`, never a wrong answer.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

import numpy as np

from refzarr.formats.kerchunk_json.byte_words import I64, Bytes, Unhandled, string_value
from refzarr.formats.kerchunk_json.window import Window

__all__ = [
    "REFS",
    "TOP",
    "DuplicateKeyError",
    "WalkSink",
    "Walker",
    "strict_object",
]

TOP, REFS = "top", "refs"
"""Containers of entries: the document's object, and the Version 1 ``refs`` object."""

_WS = re.compile(rb"[ \t\n\r]*")
_WS_BYTES = b" \t\n\r"
_QUOTE, _COLON, _COMMA, _OPEN, _CLOSE = 0x22, 0x3A, 0x2C, 0x7B, 0x7D
_FIRST_READ = 256


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def strict_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` building a dict and rejecting a key given twice."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=strict_object)


class WalkSink(Protocol):
    """What the walker reports."""

    def entry(self, container: str, key: str, value: Any, position: int) -> None:
        """An entry parsed as Python values (``position``: its key's opening quote)."""
        ...

    def refs_object(self, position: int) -> None:
        """The top-level key ``refs`` holds an object, walked as container ``REFS``."""
        ...

    def regular(self, container: str, window: Window, keys: I64) -> None:
        """Regular entries: their keys are strings ``keys`` of ``window``."""
        ...


class Walker:
    """Walks one document, reading it through windows of ``window_bytes`` bytes."""

    def __init__(self, doc: Bytes, sink: WalkSink, window_bytes: int) -> None:
        self.doc = doc
        self.data = doc.data
        self.sink = sink
        self.window_bytes = window_bytes
        self.window: Window | None = None
        self._pending: dict[str, list[I64]] = {}
        self._next = 0  # the string most likely asked for next (the one after the last)

    def walk(self) -> None:
        """Walk the whole document."""
        encoding = json.detect_encoding(self.data[:4])
        if encoding not in ("utf-8", "utf-8-sig"):
            raise Unhandled(f"{encoding} document")
        pos = self._ws(3 if encoding == "utf-8-sig" else 0)
        if self._byte(pos) != _OPEN:
            raise Unhandled("not a JSON object")
        pos = self._ws(self._members(pos + 1, TOP))
        if pos != self.doc.size:
            raise Unhandled("data after the JSON object")
        self._flush()

    def _members(self, pos: int, container: str) -> int:
        """Walk an object's members from just after its ``{``; return the position after ``}``."""
        pos = self._ws(pos)
        if self._byte(pos) == _CLOSE:
            return pos + 1
        while True:
            if self._byte(pos) != _QUOTE:
                raise Unhandled(f"expected a key at byte {pos}")
            si, window = self._string(pos)
            if window.regular[si]:
                end = window.run_end(si)
                self._pending.setdefault(container, []).append(np.arange(si, end, 2))
                pos = int(window.opens[end])
                continue
            pos = self._ws(self._member(pos, int(window.closes[si]), container))
            found = self._byte(pos)
            if found == _COMMA:
                pos = self._ws(pos + 1)
            elif found == _CLOSE:
                return pos + 1
            else:
                raise Unhandled(f"expected ',' or '}}' at byte {pos}")

    def _member(self, pos: int, key_close: int, container: str) -> int:
        """Walk one ``"key": value`` member; return the position after the value."""
        key = string_value(self.data[pos : key_close + 1])
        at = self._ws(key_close + 1)
        if self._byte(at) != _COLON:
            raise Unhandled(f"expected ':' at byte {at}")
        at = self._ws(at + 1)
        if container == TOP and key == "refs" and self._byte(at) == _OPEN:
            self.sink.refs_object(pos)
            return self._members(at + 1, REFS)
        value, at = self._value(at)
        self.sink.entry(container, key, value, pos)
        return at

    def _value(self, pos: int) -> tuple[Any, int]:
        if self._byte(pos) == _QUOTE:
            si, window = self._string(pos)
            close = int(window.closes[si])
            return string_value(self.data[pos : close + 1]), close + 1
        return self._raw_value(pos)

    def _raw_value(self, pos: int) -> tuple[Any, int]:
        """Parse any JSON value at ``pos`` with the standard decoder, reading more as needed."""
        size, total = _FIRST_READ, self.doc.size
        while True:
            stop = min(total, pos + size)
            while stop < total and self.data[stop] & 0xC0 == 0x80:
                stop -= 1  # do not cut a UTF-8 sequence
            try:
                text = self.data[pos:stop].decode("utf-8", "surrogatepass")
                value, end = _DECODER.raw_decode(text)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                if stop == total:
                    raise Unhandled(f"invalid JSON value at byte {pos}") from exc
                size *= 4
                continue
            except DuplicateKeyError as exc:
                raise Unhandled(f"duplicate key {exc.key!r}") from exc
            if end == len(text) and stop < total:
                size *= 4  # a number may go on past what was read
                continue
            used = (
                end if len(text) == stop - pos else len(text[:end].encode("utf-8", "surrogatepass"))
            )
            return value, pos + used

    def _string(self, pos: int) -> tuple[int, Window]:
        """The string opening at ``pos`` as (number, window), moving the window if needed."""
        window = self.window
        if window is not None:
            hint = self._next
            found = hint if hint < window.resolved and int(window.opens[hint]) == pos else None
            found = window.index_of(pos) if found is None else found
            if found is not None:
                self._next = found + 1
                return found, window
        self._flush()
        window = self.window = Window(self.doc, pos, self.window_bytes)
        found = window.index_of(pos)
        if found is None:
            raise Unhandled(f"expected a string at byte {pos}")
        self._next = found + 1
        return found, window

    def _flush(self) -> None:
        """Hand the runs of regular entries found in the current window to the sink."""
        if self.window is not None:
            for container, runs in self._pending.items():
                self.sink.regular(container, self.window, np.concatenate(runs))
        self._pending = {}

    def _ws(self, pos: int) -> int:
        if pos >= self.doc.size or self.data[pos] not in _WS_BYTES:
            return pos
        found = _WS.match(self.data, pos)
        return found.end() if found else pos

    def _byte(self, pos: int) -> int:
        return self.data[pos] if pos < self.doc.size else -1
