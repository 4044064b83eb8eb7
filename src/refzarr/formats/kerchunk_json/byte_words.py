"""Column-wise byte primitives of the JSON reader: 8-byte word loads, SWAR digits, span grouping.

Everything here works on many positions of one document at once. A *word* is the eight bytes
starting at a position, read as a little-endian ``uint64`` (byte ``k`` of the word is the byte
at ``position + k``), so that eight characters are tested or converted with a handful of
integer operations per position (SWAR: SIMD within a register). Digits are handled in
"zero space": a word XOR ``"00000000"``, where a digit byte is its value 0..9.
"""

from __future__ import annotations

import json
import re

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = [
    "I64",
    "MAX_DIGITS",
    "TOP_MASK",
    "U64",
    "ZEROS",
    "Bytes",
    "Mask",
    "Unhandled",
    "byte_flags",
    "group_spans",
    "match_pattern",
    "nondigit_flags",
    "parse_number",
    "string_value",
    "swar_value",
    "tail_byte",
    "top_run",
    "trail_number",
]

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]

MAX_DIGITS = 19
"""Digits of the largest offset (``2**63 - 1``); longer numbers take the per-entry path."""
ZEROS = np.uint64(0x3030303030303030)  # "00000000"
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_PAST9 = np.uint64(0x7676767676767676)  # 0x7F - 9 per byte: the high bit is set past 9
_HIGH = np.uint64(0x8080808080808080)
_ONES = np.uint64(0x0101010101010101)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_BYTE = np.uint64(0xFF)
_POW10 = np.array([10**k for k in range(MAX_DIGITS + 1)], np.uint64)
_HASH_PRIMES = np.asarray(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93], np.uint64
)
TOP_MASK = np.array([(2**64 - 1) ^ ((1 << (8 * (8 - c))) - 1) for c in range(9)], np.uint64)
"""``TOP_MASK[c]`` keeps the top ``c`` bytes of a word."""
_LOW_MASK = np.array([(1 << (8 * c)) - 1 for c in range(9)], np.uint64)


class Unhandled(Exception):
    """The fast reader met a shape it does not handle; the per-key reader decides instead."""


class Bytes:
    """A document as ``uint8`` and as overlapping little-endian words at every offset."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)
        self.u8 = np.frombuffer(data, dtype=np.uint8)
        self._last = self.size - 8
        if self._last >= 0:
            self._u64 = np.ndarray((self._last + 1,), dtype="<u8", buffer=data, strides=(1,))
        else:
            self._u64 = np.zeros(1, dtype="<u8")

    def words(self, pos: I64) -> U64:
        """The word at each position; bytes outside the document read as 0."""
        if pos.shape[0] and int(pos.min()) >= 0 and int(pos.max()) <= self._last:
            return self._u64[pos]
        out = np.zeros(pos.shape, np.uint64)
        inside = np.flatnonzero((pos >= 0) & (pos <= self._last))
        out[inside] = self._u64[pos[inside]]
        for row in np.flatnonzero((pos < 0) | (pos > self._last)).tolist():
            out[row] = self._edge_word(int(pos[row]))
        return out

    def _edge_word(self, pos: int) -> int:
        raw = bytes(max(0, -pos)) + self.data[max(pos, 0) : max(pos + 8, 0)]
        return int.from_bytes(raw[:8].ljust(8, b"\0"), "little")


_PLAIN = re.compile(rb'"[^"\\\x00-\x1f]*"')
"""A JSON string literal without escapes or control characters."""


def string_value(literal: bytes) -> str:
    """The value of a JSON string literal (quotes included); `Unhandled` when it is invalid."""
    try:
        if _PLAIN.fullmatch(literal):
            return literal[1:-1].decode("utf-8", "surrogatepass")  # as json.loads(bytes)
        value = json.loads(literal)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Unhandled(f"invalid JSON string {literal[:40]!r}") from exc
    if not isinstance(value, str):
        raise Unhandled("not a JSON string")
    return value


# -- per-byte tests ---------------------------------------------------------------------------


def byte_flags(words: U64, value: int) -> U64:
    """``0x80`` in every byte of ``words`` equal to ``value``, 0 elsewhere (exact, no carries)."""
    t = words ^ (np.uint64(value) * _ONES)
    return ~(((t & _LOW7) + _LOW7) | t) & _HIGH


def nondigit_flags(zero_space: U64) -> U64:
    """``0x80`` in every byte of a zero-space word that is not a decimal digit."""
    out = zero_space & _LOW7
    out += _PAST9
    out |= zero_space
    out &= _HIGH
    return out


def top_run(flags: U64) -> I64:
    """Number of bytes from byte 7 down before a flagged byte (8 when none is)."""
    smear = flags >> np.uint64(8)
    smear |= flags
    step = smear >> np.uint64(16)
    smear |= step
    np.right_shift(smear, np.uint64(32), out=step)
    smear |= step
    run: I64 = np.subtract(8, np.bitwise_count(smear), dtype=np.int64)
    return run


def tail_byte(hi: U64, lo: U64, back: I64) -> U64:
    """The byte ``back`` (1..16) positions before the end of the 16 bytes ``lo`` then ``hi``."""
    shift = np.subtract(8, back, dtype=np.int64)
    shift &= 7
    shift <<= 3
    out = np.where(back <= 8, hi, lo)
    out >>= shift.astype(np.uint64)
    out &= _BYTE
    return out


def match_pattern(doc: Bytes, pos: I64, pattern: bytes) -> Mask:
    """Whether ``pattern`` occurs at each position."""
    ok = np.ones(pos.shape, np.bool_)
    if pos.shape[0] and int(pos.max()) + len(pattern) > doc.size:
        ok &= pos + len(pattern) <= doc.size
    for k in range(0, len(pattern), 8):
        chunk = pattern[k : k + 8]
        words = doc.words(pos + k if k else pos)
        words &= _LOW_MASK[len(chunk)]
        ok &= words == np.uint64(int.from_bytes(chunk, "little"))
    return ok


# -- numbers ----------------------------------------------------------------------------------


def swar_value(digits: U64) -> U64:
    """The number eight zero-space digit bytes spell (byte 0 most significant)."""
    x = digits * np.uint64(10)
    step = digits >> np.uint64(8)
    x += step
    x &= np.uint64(0x00FF00FF00FF00FF)
    np.right_shift(x, np.uint64(16), out=step)
    x *= np.uint64(100)
    x += step
    x &= np.uint64(0x0000FFFF0000FFFF)
    np.right_shift(x, np.uint64(32), out=step)
    x *= np.uint64(10000)
    x += step
    x &= np.uint64(0xFFFFFFFF)
    return x


def _value(zero_words: list[U64], count: I64) -> tuple[U64, Mask]:
    """Value of the last ``count`` bytes of the words (word ``k`` ends ``8k`` bytes earlier).

    Returns the value and whether those bytes are all digits.
    """
    value = np.zeros(count.shape, np.uint64)
    digits = np.ones(count.shape, np.bool_)
    for k, word in enumerate(zero_words):
        part = TOP_MASK[np.clip(count - 8 * k, 0, 8)]
        part &= word
        digits &= nondigit_flags(part) == 0
        part = swar_value(part)
        if k:
            part *= _POW10[8 * k]
        value += part
    return value, digits


def _no_leading_zero(value: U64, count: I64) -> Mask:
    """Whether numbers of ``count`` digits and value ``value`` start with a non-zero digit."""
    ok: Mask = (value >= _POW10[np.clip(count - 1, 0, MAX_DIGITS)]) | (count == 1)
    return ok


def parse_number(doc: Bytes, end: I64, count: I64) -> tuple[U64, Mask]:
    """The JSON integers (digits only, no leading zero) of ``count`` bytes ending at ``end``.

    Valid only for 1 to 19 digits, which always fit a ``uint64``.
    """
    nwords = min(3, max(1, -(-int(count.max()) // 8))) if count.shape[0] else 1
    words = [doc.words(end - 8 * (k + 1)) for k in range(nwords)]
    for word in words:
        word ^= ZEROS
    value, ok = _value(words, count)
    ok &= (count >= 1) & (count <= min(MAX_DIGITS, 8 * nwords))
    ok &= _no_leading_zero(value, count)
    return value, ok


def trail_number(doc: Bytes, end: I64) -> tuple[U64, I64, Mask]:
    """The JSON integer (no leading zero) made of the digits just before each ``end``.

    Returns the value, the number of digits and whether it is a valid number of at most 19
    digits.
    """
    words: list[U64] = []
    count = np.zeros(end.shape, np.int64)
    active = np.ones(end.shape, np.bool_)
    while len(words) < 3:
        word = doc.words(end - 8 * (len(words) + 1))
        word ^= ZEROS
        words.append(word)
        run = top_run(nondigit_flags(word))
        count += np.where(active, run, 0) if len(words) > 1 else run
        active &= run == 8
        if not active.any():
            break
    value, _ = _value(words, count)
    ok = (count >= 1) & (count <= MAX_DIGITS) & _no_leading_zero(value, count)
    return value, count, ok


# -- grouping equal spans ---------------------------------------------------------------------


def _span_words(doc: Bytes, start: I64, length: I64, nwords: int) -> list[U64]:
    """The words covering each span, bytes past the span's end zeroed."""
    words = []
    shortest = int(length.min())
    for k in range(nwords):
        word = doc.words(start + 8 * k)
        if shortest < 8 * (k + 1):
            word &= _LOW_MASK[np.clip(length - 8 * k, 0, 8)]
        words.append(word)
    return words


def _same_as_previous(words: list[U64], length: I64) -> Mask:
    """Whether each span equals the span before it (False for the first)."""
    same = np.zeros(length.shape[0], np.bool_)
    tail = length[1:] == length[:-1]
    for word in words:
        tail &= word[1:] == word[:-1]
    same[1:] = tail
    return same


def _hash(words: list[U64], length: I64) -> U64:
    h = length.astype(np.uint64)
    for k, word in enumerate(words):
        h = (h ^ word) * _HASH_PRIMES[k % 4]
        h ^= h >> np.uint64(31)
    return h


def _codes(hashes: U64) -> tuple[I64, I64]:
    """Codes numbering distinct hashes, and the first row holding each code."""
    # from_buffers, not pa.array: the latter imports pandas (half a second) when installed
    values = pa.Array.from_buffers(pa.uint64(), hashes.shape[0], [None, pa.py_buffer(hashes)])
    indices = values.dictionary_encode().indices
    codes = np.frombuffer(
        indices.buffers()[1], np.int32, count=len(indices), offset=4 * indices.offset
    ).astype(np.int64)
    # pyarrow numbers values in order of first appearance: a code's first row is where the
    # running maximum of the codes grows
    grows = np.ones(codes.shape[0], np.bool_)
    grows[1:] = codes[1:] > np.maximum.accumulate(codes)[:-1]
    first = np.flatnonzero(grows)
    if not np.array_equal(codes[first], np.arange(first.shape[0])):
        _, first = np.unique(codes, return_index=True)
    return codes, first


def group_spans(doc: Bytes, start: I64, length: I64, max_words: int = 32) -> tuple[I64, I64]:
    """Group equal byte spans: ``(code per span, first row of each code)``.

    A span equal to the one before it takes its code; the others are hashed, and each is then
    compared byte for byte with the first span of its code, so that a hash collision can never
    merge different spans: a span that differs from its representative, or is longer than
    ``8 * max_words`` bytes, gets code -1.
    """
    n = start.shape[0]
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    nwords = min(-(-int(length.max()) // 8), max_words)
    words = _span_words(doc, start, length, nwords)
    same = _same_as_previous(words, length)
    heads = np.flatnonzero(~same)
    head_words = [word[heads] for word in words]
    head_length = length[heads]
    codes, first = _codes(_hash(head_words, head_length))
    rep = first[codes]
    equal = head_length == head_length[rep]
    for word in head_words:
        equal &= word == word[rep]
    codes[~equal] = -1
    row_codes = codes[np.cumsum(~same) - 1]
    row_codes[length > 8 * max_words] = -1
    return row_codes, heads[first]
