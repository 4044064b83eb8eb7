"""The netCDF3 header: magic, record count, dimensions, attributes and variables, parsed from
bytes as the format specification (CDF-1, CDF-2, CDF-5) lays them out.

Every count and length is checked against the bytes the file can still hold before anything
is allocated or looped over, so a damaged header fails fast with a `ScanError`. When the
bytes given end before the header does, `NeedMoreBytes` says how many are needed (the caller
reads more of the file and parses again).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from refzarr.errors import ScanError
from refzarr.scan.netcdf3.types import CDF5_TYPES, NC_TYPES, attribute_value, type_name

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
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


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
    """

    name: str
    dimids: tuple[int, ...]
    attributes: dict[str, Any]
    nc_type: int
    vsize: int
    begin: int
    fill: tuple[int, bytes] | None = None
    """The ``_FillValue`` attribute as stored: its type code and bytes (None: no such)."""


@dataclass(frozen=True, slots=True)
class Header:
    """A parsed header; ``size``: its length in bytes (where data may start)."""

    version: int
    numrecs: int
    dimensions: tuple[Dimension, ...]
    attributes: dict[str, Any]
    variables: tuple[Variable, ...]
    size: int


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
    return _Parser(data, file_size, where, version).header()


What = tuple[Any, ...]
"""What a field is, as parts joined into text only when a message needs it (the header of a
small file is parsed in tens of microseconds; formatting every description would double it)."""


def _text(what: What) -> str:
    return "".join(str(part) for part in what)


class _Parser:
    """A cursor over the header bytes, reading big-endian fields of the version's widths."""

    def __init__(self, data: bytes, file_size: int, where: str, version: int) -> None:
        self.data = data
        self.file_size = file_size
        self.where = where
        self.version = version
        self.pos = 4
        wide = version == 5
        self.count_width = 8 if wide else 4
        self.count_struct = _U64 if wide else _U32
        self.offset_width = 4 if version == 1 else 8
        count = "Q" if wide else "I"
        self.list_struct = struct.Struct(f">I{count}")  # a list's tag and count; type and count
        self.trailer = struct.Struct(f">I{count}{'I' if version == 1 else 'Q'}")

    def header(self) -> Header:
        numrecs = self.number(self.count_width, ("the record count",))
        if numrecs == (1 << (8 * self.count_width)) - 1:
            numrecs = STREAMING
        dims = tuple(self.entries(_DIMENSION, self.dimension))
        self.unique([d.name for d in dims], "dimensions")
        attrs = self.attributes(self.entries(_ATTRIBUTE, self.attribute), "global attributes")
        variables = tuple(self.entries(_VARIABLE, self.variable))
        self.unique([v.name for v in variables], "variables")
        return Header(self.version, numrecs, dims, attrs, variables, self.pos)

    def unique(self, names: list[str], what: str) -> None:
        """Raise unless ``names`` are distinct and not empty (netCDF-C writes no others)."""
        if len(set(names)) == len(names) and all(names):
            return
        seen = next((n for k, n in enumerate(names) if not n or n in names[:k]), "")
        raise ScanError(
            f"{self.where}: the header is damaged: {what} with the name {seen!r} "
            f"{'twice' if seen else '(empty)'}"
        )

    def attributes(self, pairs: list[tuple[str, Any]], what: str) -> dict[str, Any]:
        self.unique([name for name, _ in pairs], what)
        return dict(pairs)

    # -- fields -------------------------------------------------------------------------------

    def take(self, length: int, what: What) -> bytes:
        end = self.pos + length
        if end > len(self.data):
            self.beyond(length, what)
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def beyond(self, length: int, what: What) -> None:
        """Raise for ``length`` bytes at the cursor that ``data`` does not hold."""
        if self.pos + length > self.file_size:
            raise ScanError(
                f"{self.where}: the header is truncated or damaged: {_text(what)} at byte "
                f"{self.pos} needs {length} bytes, but the file ends at byte {self.file_size}"
            )
        raise NeedMoreBytes(self.pos + length)

    def number(self, width: int, what: What) -> int:
        pos = self.pos
        if pos + width > len(self.data):
            self.beyond(width, what)
        self.pos = pos + width
        value: int = (_U32 if width == 4 else _U64).unpack_from(self.data, pos)[0]
        return value

    def fields(self, layout: struct.Struct, what: What) -> tuple[int, ...]:
        """Several numbers at the cursor, read at once."""
        pos = self.pos
        if pos + layout.size > len(self.data):
            self.beyond(layout.size, what)
        self.pos = pos + layout.size
        return layout.unpack_from(self.data, pos)

    def count(self, what: What, entry_bytes: int) -> int:
        """A count of things of at least ``entry_bytes`` bytes each, checked against the file."""
        at = self.pos
        n = self.number(self.count_width, what)
        self.check_count(n, entry_bytes, at, what)
        return n

    def check_count(self, n: int, entry_bytes: int, at: int, what: What) -> None:
        if n * entry_bytes > self.file_size - self.pos:
            raise ScanError(
                f"{self.where}: the header is damaged: {_text(what)} at byte {at} is {n}, more "
                f"than the {self.file_size - self.pos} bytes left in the file can hold"
            )

    def name(self, what: What) -> str:
        length = self.count(("the name length of ", *what), 1)
        raw = self.take(length + (-length % 4), ("the name of ", *what))[:length]
        try:  # netCDF-C keeps names as C strings: a NUL ends one
            return raw.split(b"\x00", 1)[0].decode("utf-8")
        except UnicodeDecodeError:
            raise ScanError(
                f"{self.where}: the name of {_text(what)} is not UTF-8: {raw!r}"
            ) from None

    # -- lists --------------------------------------------------------------------------------

    def entries(self, tag: int, read_one: Any) -> list[Any]:
        """The entries of a dimension / attribute / variable list (empty when ABSENT)."""
        kind = _LIST_NAMES[tag]
        at = self.pos
        found, n = self.fields(self.list_struct, ("the ", kind, " list"))
        if found == 0 and n == 0:
            return []
        self.check_count(n, _MIN_ENTRY[tag], at + 4, ("the number of ", kind, "s"))
        if found != tag:
            raise ScanError(
                f"{self.where}: the header is damaged: expected the {kind} list (tag {tag:#x}) "
                f"or nothing at byte {at}, found tag {found:#x} with {n} entries"
            )
        return [read_one(k) for k in range(n)]

    def dimension(self, k: int) -> Dimension:
        name = self.name(("dimension ", k))
        return Dimension(name, self.number(self.count_width, ("the length of dimension ", name)))

    def attribute(self, k: int, owner: str = "global") -> tuple[str, Any]:
        name, code, raw, n = self.raw_attribute(k, owner)
        return name, attribute_value(code, raw, n, keep_nul=name == "_FillValue")

    def raw_attribute(self, k: int, owner: str) -> tuple[str, int, bytes, int]:
        name = self.name((owner, " attribute ", k))
        what = (owner, " attribute ", repr(name))
        at = self.pos
        code, n = self.fields(self.list_struct, ("the type of ", *what))
        self.check_type(code, at, what)
        itemsize = NC_TYPES[code][0].itemsize
        self.check_count(n, itemsize, at + 4, ("the number of values of ", *what))
        size = n * itemsize
        raw = self.take(size + (-size % 4), ("the values of ", *what))[:size]
        return name, code, raw, n

    def variable(self, k: int) -> Variable:
        name = self.name(("variable ", k))
        what = f"variable {name!r}"
        ndims = self.count(("the number of dimensions of ", what), self.count_width)
        if ndims > MAX_VAR_DIMS:
            raise ScanError(
                f"{self.where}: {what} has {ndims} dimensions, more than netCDF allows "
                f"({MAX_VAR_DIMS}): the header is damaged"
            )
        raw = self.take(ndims * self.count_width, ("the dimension ids of ", what))
        dimids = tuple(v for (v,) in self.count_struct.iter_unpack(raw))
        pairs, fill = [], None
        for a_name, a_code, raw, n in self.entries(
            _ATTRIBUTE, lambda j: self.raw_attribute(j, what)
        ):
            pairs.append((a_name, attribute_value(a_code, raw, n, keep_nul=a_name == "_FillValue")))
            if a_name == "_FillValue":
                fill = (a_code, raw)
        attrs = self.attributes(pairs, f"attributes of {what}")
        at = self.pos
        code, vsize, begin = self.fields(self.trailer, ("the type, size and offset of ", what))
        self.check_type(code, at, (what,))
        return Variable(name, dimids, attrs, code, vsize, begin, fill)

    def check_type(self, code: int, at: int, what: What) -> None:
        if code not in NC_TYPES or (code in CDF5_TYPES and self.version != 5):
            known = "1..11" if self.version == 5 else "1..6 (7..11 need CDF-5)"
            raise ScanError(
                f"{self.where}: {_text(what)} has {type_name(code)} at byte {at}, not a netCDF "
                f"type of a version {self.version} file (types {known}): the header is damaged"
            )
