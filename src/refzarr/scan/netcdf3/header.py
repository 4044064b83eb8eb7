"""The netCDF3 header: magic, record count, dimensions, attributes and variables, parsed from
bytes as the format specification (CDF-1, CDF-2, CDF-5) lays them out.

Every count and length is checked against the bytes the file can still hold before anything
is allocated or looped over, so a damaged header fails fast with a `ScanError`. When the
bytes given end before the header does, `NeedMoreBytes` says how many are needed (the caller
reads more of the file and parses again).

The parser is a cursor with one method per kind of entry and the bounds checks written out
inline: a small file's header is parsed in tens of microseconds, a share of its scan that
matters when scanning thousands of them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from refzarr.errors import ScanError
from refzarr.scan.netcdf3.types import (
    ATTRIBUTE_TYPES,
    CDF5_TYPES,
    CHAR,
    EMPTY_ATTRIBUTE_TYPES,
    ITEMSIZES,
    attribute_value,
    type_name,
)

__all__ = [
    "STREAMING",
    "Dimension",
    "Header",
    "NeedMoreBytes",
    "Variable",
    "parse_header",
]

STREAMING = -1
"""`Header.numrecs` when the file says the record count is unknown (all bits set)."""

MAX_VAR_DIMS = 1024
"""Most dimensions a variable may have (netCDF-C's ``NC_MAX_VAR_DIMS``)."""

_DIMENSION, _VARIABLE, _ATTRIBUTE = 0x0A, 0x0B, 0x0C
_LIST_NAMES = {_DIMENSION: "dimension", _VARIABLE: "variable", _ATTRIBUTE: "attribute"}
# fewest bytes one entry of each list takes (CDF-1 widths, empty name): bounds its count
_MIN_ENTRY = {_DIMENSION: 8, _ATTRIBUTE: 12, _VARIABLE: 28}
_FILL = "_FillValue"


class NeedMoreBytes(Exception):
    """The header runs on past the bytes given: ``needed`` bytes from the start are needed."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


class Dimension(NamedTuple):
    """A dimension: its name and length (0 for the record dimension)."""

    name: str
    length: int


class Variable(NamedTuple):
    """A variable as the header describes it.

    ``begin`` is where its data (its first record's, for a record variable) starts; ``vsize``
    is the header's value, which readers recompute (it overflows for large variables).
    ``attributes`` hold JSON values (tuples for several numbers); ``types`` the numpy type of
    those whose type JSON loses (`refzarr.model.attr_types`).
    """

    name: str
    dimids: tuple[int, ...]
    attributes: dict[str, Any]
    nc_type: int
    vsize: int
    begin: int
    fill: tuple[int, bytes] | None = None
    """The ``_FillValue`` attribute as stored: its type code and bytes (None: no such)."""
    types: dict[str, str] = {}  # noqa: RUF012 (never mutated: a NamedTuple default)
    kept: dict[str, tuple[int, ...]] = {}  # noqa: RUF012
    """The stored bytes of ``char`` attributes that are not UTF-8 (their values show U+FFFD)."""


@dataclass(frozen=True, slots=True)
class Header:
    """A parsed header; ``size``: its length in bytes (where data may start)."""

    version: int
    numrecs: int
    dimensions: tuple[Dimension, ...]
    attributes: dict[str, Any]
    variables: tuple[Variable, ...]
    size: int
    types: dict[str, str]
    """The numpy types of global attributes that JSON loses."""
    kept: dict[str, tuple[int, ...]]
    """The stored bytes of global ``char`` attributes that are not UTF-8."""


def parse_header(data: bytes, file_size: int, where: str) -> Header:
    """Parse the header at the start of ``data``, the first bytes of a file of ``file_size``.

    Raises
    ------
    NeedMoreBytes
        When ``data`` is shorter than the file and ends inside the header.
    ScanError
        When the header is damaged or truncated (names ``where`` and what is wrong).
    """
    if len(data) < 4 and len(data) < file_size:
        raise NeedMoreBytes(4)
    magic = bytes(data[:4])
    if magic[:3] != b"CDF":
        raise ScanError(f"{where}: not a netCDF3 file (first bytes {magic!r}, expected b'CDF')")
    version = magic[3] if len(magic) == 4 else -1
    if version not in (1, 2, 5):
        raise ScanError(
            f"{where}: unknown netCDF3 format version {version} (first bytes {magic!r}); "
            "refzarr reads versions 1 (classic), 2 (64-bit offset) and 5 (64-bit data)"
        )
    try:
        return _parse_quickly(data, version)
    except (_Unsure, struct.error, ValueError, KeyError, OverflowError):
        # something to report (or more bytes to read): the careful parser says what
        return _Parser(data, file_size, where, version).header()


@dataclass(slots=True)
class AttributeList:
    """An attribute list as both header parsers collect it: values, the types JSON loses,
    the ``_FillValue`` as stored and the bytes of text that is not UTF-8."""

    attrs: dict[str, Any] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    kept: dict[str, tuple[int, ...]] = field(default_factory=dict)
    fill: tuple[int, bytes] | None = None

    def add(self, name: str, code: int, raw: bytes, n: int) -> None:
        """One attribute of type ``code`` with ``n`` values stored as ``raw``."""
        self.attrs[name] = value = attribute_value(code, raw, n, keep_nul=name == _FILL)
        if code == CHAR and "\ufffd" in value:
            keep_bytes(name, raw, self.kept)
        kind = ATTRIBUTE_TYPES.get(code) if n else EMPTY_ATTRIBUTE_TYPES.get(code)
        if kind is not None:
            self.types[name] = kind
        if name == _FILL:
            self.fill = (code, raw)


def keep_bytes(name: str, raw: bytes, kept: dict[str, tuple[int, ...]]) -> None:
    """Keep the stored bytes of a text attribute in ``kept`` when they are not UTF-8 (its value
    shows U+FFFD, as netCDF4-python shows it; the bytes are never re-encoded in silence)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        kept[name] = tuple(raw)


class _Unsure(Exception):
    """`_parse_quickly` met something it leaves to the careful parser."""


_COUNT_AT = {False: struct.Struct(">I").unpack_from, True: struct.Struct(">Q").unpack_from}
_PAIR_AT = {False: struct.Struct(">II").unpack_from, True: struct.Struct(">IQ").unpack_from}
_TRAILERS = {1: struct.Struct(">III"), 2: struct.Struct(">IIQ"), 5: struct.Struct(">IQQ")}


def _parse_quickly(data: bytes, version: int) -> Header:
    """`parse_header` for a sound header held whole in ``data``: one pass, bounds checked
    inline; anything else (damage, a header running on past ``data``, a name holding NUL,
    a repeated name) raises `_Unsure` and `_Parser` parses again to say what it is.

    Counts need no check against the file's size: every entry takes at least 8 bytes, so a
    damaged count runs out of ``data`` within a few entries.
    """
    end = len(data)
    wide = version == 5
    cw = 8 if wide else 4
    count_at, pair_at = _COUNT_AT[wide], _PAIR_AT[wide]

    def name_at(pos: int) -> tuple[str, int]:
        start = pos + cw
        n = count_at(data, pos)[0]
        stop = start + n + (-n % 4)
        if stop > end:
            raise _Unsure
        text = data[start : start + n].decode("utf-8")
        if not text or "\x00" in text:
            raise _Unsure
        return text, stop

    def attributes_at(pos: int) -> tuple[dict[str, Any], dict[str, str], Any, Any, int]:
        tag, count = pair_at(data, pos)
        pos += 4 + cw
        found = AttributeList()
        if tag != _ATTRIBUTE and (tag or count):
            raise _Unsure
        for _ in range(count):
            name, pos = name_at(pos)
            code, n = pair_at(data, pos)
            if name in found.attrs or (code > 6 and not wide):
                raise _Unsure
            start = pos + 4 + cw
            size = n * ITEMSIZES[code]
            pos = start + size + (-size % 4)
            if pos > end:
                raise _Unsure
            found.add(name, code, data[start : start + size], n)
        return found.attrs, found.types, found.fill, found.kept, pos

    numrecs = count_at(data, 4)[0]
    if numrecs == (1 << (8 * cw)) - 1:
        numrecs = STREAMING
    pos = 4 + cw
    tag, count = pair_at(data, pos)
    pos += 4 + cw
    if tag != _DIMENSION and (tag or count):
        raise _Unsure
    dims = []
    for _ in range(count):
        name, pos = name_at(pos)
        dims.append(Dimension(name, count_at(data, pos)[0]))
        pos += cw
    attrs, types, _, kept, pos = attributes_at(pos)
    tag, count = pair_at(data, pos)
    pos += 4 + cw
    if tag != _VARIABLE and (tag or count):
        raise _Unsure
    trailer_at, trailer_size = _TRAILERS[version].unpack_from, _TRAILERS[version].size
    variables = []
    dimid_code = "Q" if wide else "I"
    for _ in range(count):
        name, pos = name_at(pos)
        ndims = count_at(data, pos)[0]
        pos += cw
        if ndims > MAX_VAR_DIMS or pos + ndims * cw > end:
            raise _Unsure
        dimids = struct.unpack_from(f">{ndims}{dimid_code}", data, pos)
        pos += ndims * cw
        var_attrs, var_types, fill, var_kept, pos = attributes_at(pos)
        code, vsize, begin = trailer_at(data, pos)
        pos += trailer_size
        if code not in ITEMSIZES or (code > 6 and not wide):
            raise _Unsure
        variables.append(
            Variable(name, dimids, var_attrs, code, vsize, begin, fill, var_types, var_kept)
        )
    if len({d.name for d in dims}) != len(dims) or len({v.name for v in variables}) != len(
        variables
    ):
        raise _Unsure
    return Header(version, numrecs, tuple(dims), attrs, tuple(variables), pos, types, kept)


What = tuple[Any, ...]
"""What a field is, as parts joined into text only when a message needs it (formatting every
description of a small file's header would cost as much as parsing it)."""


def _text(what: What) -> str:
    return "".join(str(part) for part in what)


class _Parser:
    """A cursor over the header bytes, reading big-endian fields of the version's widths."""

    __slots__ = (
        "count_at",
        "count_width",
        "data",
        "dimids_code",
        "end",
        "file_size",
        "pair_at",
        "pair_width",
        "pos",
        "trailer",
        "version",
        "where",
    )

    def __init__(self, data: bytes, file_size: int, where: str, version: int) -> None:
        self.data = data
        self.end = len(data)
        self.file_size = file_size
        self.where = where
        self.version = version
        self.pos = 4
        wide = version == 5
        count = "Q" if wide else "I"
        self.count_width = 8 if wide else 4
        self.count_at = struct.Struct(f">{count}").unpack_from
        self.pair_at = struct.Struct(f">I{count}").unpack_from  # a tag / type, then a count
        self.pair_width = 4 + self.count_width
        self.dimids_code = count
        self.trailer = struct.Struct(f">I{count}{'I' if version == 1 else 'Q'}")

    def header(self) -> Header:
        numrecs = self.number(("the record count",))
        if numrecs == (1 << (8 * self.count_width)) - 1:
            numrecs = STREAMING
        dims = [
            Dimension(self.name(("dimension ", k)), self.number(("the length of dimension ", k)))
            for k in range(self.list_start(_DIMENSION))
        ]
        self.unique([d.name for d in dims], "dimensions")
        attrs, types, _, kept = self.attributes(("global",))
        variables = [self.variable(k) for k in range(self.list_start(_VARIABLE))]
        self.unique([v.name for v in variables], "variables")
        return Header(
            self.version, numrecs, tuple(dims), attrs, tuple(variables), self.pos, types, kept
        )

    def unique(self, names: list[str], what: str) -> None:
        """Raise unless ``names`` are distinct and not empty (netCDF-C writes no others)."""
        if len(set(names)) == len(names) and all(names):
            return
        seen = next((n for k, n in enumerate(names) if not n or n in names[:k]), "")
        raise ScanError(
            f"{self.where}: the header is damaged: {what} with the name {seen!r} "
            f"{'twice' if seen else '(empty)'}"
        )

    # -- fields -------------------------------------------------------------------------------

    def beyond(self, length: int, what: What) -> None:
        """Raise for ``length`` bytes at the cursor that ``data`` does not hold."""
        if self.pos + length > self.file_size:
            raise ScanError(
                f"{self.where}: the header is truncated or damaged: {_text(what)} at byte "
                f"{self.pos} needs {length} bytes, but the file ends at byte {self.file_size}"
            )
        raise NeedMoreBytes(self.pos + length)

    def number(self, what: What) -> int:
        """A count-wide number at the cursor."""
        pos = self.pos
        if pos + self.count_width > self.end:
            self.beyond(self.count_width, what)
        self.pos = pos + self.count_width
        value: int = self.count_at(self.data, pos)[0]
        return value

    def check_count(self, n: int, entry_bytes: int, at: int, what: What) -> None:
        """Raise when ``n`` things of ``entry_bytes`` each cannot fit in the rest of the file."""
        if n * entry_bytes > self.file_size - self.pos:
            raise ScanError(
                f"{self.where}: the header is damaged: {_text(what)} at byte {at} is {n}, more "
                f"than the {self.file_size - self.pos} bytes left in the file can hold"
            )

    def padded(self, n: int, itemsize: int, what: What, count_what: What) -> bytes:
        """``n`` values of ``itemsize`` bytes at the cursor (the count just read), padded to 4."""
        pos = self.pos
        size = n * itemsize
        stop = pos + size + (-size % 4)
        if stop > self.end:
            self.check_count(n, itemsize, pos - self.count_width, count_what)
            self.beyond(stop - pos, what)
        self.pos = stop
        return self.data[pos : pos + size]

    def name(self, what: What) -> str:
        n = self.number(("the name length of ", *what))
        raw = self.padded(n, 1, ("the name of ", *what), ("the name length of ", *what))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ScanError(
                f"{self.where}: the name of {_text(what)} is not UTF-8: {raw!r}"
            ) from None
        # netCDF-C keeps names as C strings: a NUL ends one
        return text.partition("\x00")[0] if "\x00" in text else text

    # -- lists --------------------------------------------------------------------------------

    def list_start(self, tag: int) -> int:
        """The number of entries of a dimension / attribute / variable list (0 when ABSENT)."""
        at = self.pos
        if at + self.pair_width > self.end:
            self.beyond(self.pair_width, ("the ", _LIST_NAMES[tag], " list"))
        found, n = self.pair_at(self.data, at)
        n = int(n)
        self.pos = at + self.pair_width
        if found == 0 and n == 0:
            return 0
        kind = _LIST_NAMES[tag]
        self.check_count(n, _MIN_ENTRY[tag], at + 4, ("the number of ", kind, "s"))
        if found != tag:
            raise ScanError(
                f"{self.where}: the header is damaged: expected the {kind} list (tag {tag:#x}) "
                f"or nothing at byte {at}, found tag {found:#x} with {n} entries"
            )
        return n

    def attributes(
        self, owner: What
    ) -> tuple[dict[str, Any], dict[str, str], tuple[int, bytes] | None, dict[str, Any]]:
        """An attribute list: values, the types JSON loses, the ``_FillValue`` as stored and
        the bytes of text that is not UTF-8."""
        found = AttributeList()
        attrs = found.attrs
        for k in range(self.list_start(_ATTRIBUTE)):
            name = self.name((*owner, " attribute ", k))
            if not name or name in attrs:
                label = (
                    "global attributes" if owner == ("global",) else f"attributes of {_text(owner)}"
                )
                self.unique([*attrs, name], label)
            found.add(name, *self.attribute_values(owner, name))
        return attrs, found.types, found.fill, found.kept

    def attribute_values(self, owner: What, name: str) -> tuple[int, bytes, int]:
        at = self.pos
        if at + self.pair_width > self.end:
            self.beyond(self.pair_width, ("the type of ", *owner, " attribute ", repr(name)))
        code, n = self.pair_at(self.data, at)
        self.pos = at + self.pair_width
        itemsize = ITEMSIZES.get(code, 0)
        if not itemsize or (code in CDF5_TYPES and self.version != 5):
            self.bad_type(code, at, (*owner, " attribute ", repr(name)))
        what = (" of ", *owner, " attribute ", repr(name))
        raw = self.padded(n, itemsize, ("the values", *what), ("the number of values", *what))
        return code, raw, n

    def variable(self, k: int) -> Variable:
        name = self.name(("variable ", k))
        owner = ("variable ", repr(name))
        at = self.pos
        ndims = self.number(("the number of dimensions of ", *owner))
        if ndims > MAX_VAR_DIMS:
            self.check_count(ndims, self.count_width, at, ("the number of dimensions of ", *owner))
            raise ScanError(
                f"{self.where}: variable {name!r} has {ndims} dimensions, more than netCDF "
                f"allows ({MAX_VAR_DIMS}): the header is damaged"
            )
        raw = self.padded(
            ndims,
            self.count_width,
            ("the dimension ids of ", *owner),
            ("the number of dimensions of ", *owner),
        )
        dimids = struct.unpack(f">{ndims}{self.dimids_code}", raw)
        attrs, types, fill, kept = self.attributes(owner)
        at = self.pos
        size = self.trailer.size
        if at + size > self.end:
            self.beyond(size, ("the type, size and offset of ", *owner))
        code, vsize, begin = self.trailer.unpack_from(self.data, at)
        self.pos = at + size
        if code not in ITEMSIZES or (code in CDF5_TYPES and self.version != 5):
            self.bad_type(code, at, owner)
        return Variable(name, dimids, attrs, code, vsize, begin, fill, types, kept)

    def bad_type(self, code: int, at: int, what: What) -> None:
        known = "1..11" if self.version == 5 else "1..6 (7..11 need CDF-5)"
        raise ScanError(
            f"{self.where}: {_text(what)} has {type_name(code)} at byte {at}, not a netCDF "
            f"type of a version {self.version} file (types {known}): the header is damaged"
        )
