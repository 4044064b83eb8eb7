"""HDF4's data descriptor (DD) blocks: the table of every object in a file.

After the 4-byte magic number comes a chain of DD blocks; each holds a count (2 bytes), the
offset of the next block (4 bytes, 0 for the last) and that many 12-byte descriptors: tag,
reference number, offset and length of an object, all big-endian. A tag with bit 0x4000 set
marks a special element (linked blocks, external, compressed, chunked) whose bytes are a
header describing where the data really is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refzarr.errors import ScanError
from refzarr.scan.hdf4 import MAGIC
from refzarr.scan.hdf4.source import Source

__all__ = ["SPECIAL_BIT", "DDTable", "read_dd_table"]

SPECIAL_BIT = 0x4000
DFTAG_NULL = 1
DFTAG_FREE = 108
_DD = np.dtype([("tag", ">u2"), ("ref", ">u2"), ("offset", ">i4"), ("length", ">i4")])
MAX_BLOCKS = 1_000_000
"""DD blocks read at most (a chain longer than this is taken for a loop)."""


@dataclass(frozen=True, slots=True)
class Descriptor:
    """One object: its tag (special bit kept), reference number, offset and length."""

    tag: int
    ref: int
    offset: int
    length: int

    @property
    def special(self) -> bool:
        """Whether the object is a special element (its bytes are a header)."""
        return bool(self.tag & SPECIAL_BIT) and not self.tag & 0x8000


@dataclass(frozen=True, slots=True)
class DDTable:
    """Every descriptor of a file, by (tag without its special bit, ref)."""

    url: str
    by_key: dict[tuple[int, int], Descriptor]
    order: tuple[Descriptor, ...]

    def get(self, tag: int, ref: int) -> Descriptor | None:
        """The object with this tag (special or not) and ref, or None."""
        return self.by_key.get((tag & ~SPECIAL_BIT, ref))

    def find(self, tag: int, ref: int, what: str) -> Descriptor:
        """The object with this tag and ref; `ScanError` naming ``what`` when absent."""
        found = self.get(tag, ref)
        if found is None:
            raise ScanError(f"{self.url}: {what}: no object with tag {tag} and ref {ref}")
        return found

    def refs(self, tag: int) -> list[int]:
        """Refs of every object with this tag, in ascending order."""
        base = tag & ~SPECIAL_BIT
        return sorted(ref for (t, ref) in self.by_key if t == base)


def read_dd_table(source: Source) -> DDTable:
    """Read the DD block chain of an HDF4 file.

    Raises
    ------
    ScanError
        When the file lacks HDF4's magic number, a block lies past the file's end, the chain
        loops, or a descriptor points outside the file.
    """
    if source.size < 4 or source.read_range(0, 4, "the magic number") != MAGIC:
        raise ScanError(f"{source.url}: no HDF4 magic number (0e 03 13 01) at byte 0")
    seen: set[int] = set()
    found: list[Descriptor] = []
    offset = 4
    while offset:
        if offset in seen or len(seen) >= MAX_BLOCKS:
            raise ScanError(
                f"{source.url}: the DD block chain loops back to byte {offset} (damaged file)"
            )
        seen.add(offset)
        head = source.read_range(offset, 6, f"the DD block at byte {offset}")
        count, following = int.from_bytes(head[:2], "big"), int.from_bytes(head[2:], "big")
        raw = source.read_range(offset + 6, 12 * count, f"the {count} descriptors of the DD block")
        found.extend(_descriptors(raw, count, source))
        offset = following
    by_key: dict[tuple[int, int], Descriptor] = {}
    for dd in found:
        by_key.setdefault((dd.tag & ~SPECIAL_BIT, dd.ref), dd)
    return DDTable(source.url, by_key, tuple(found))


def _descriptors(raw: bytes, count: int, source: Source) -> list[Descriptor]:
    table = np.frombuffer(raw, dtype=_DD, count=count)
    keep = (table["tag"] != DFTAG_NULL) & (table["tag"] != DFTAG_FREE) & (table["tag"] != 0)
    rows = table[keep].tolist()
    past = [(t, r, o, n) for t, r, o, n in rows if n > 0 and o >= 0 and o + n > source.size]
    if past:
        tag, ref, offset, length = past[0]
        reach = max(o + n for _, _, o, n in past)
        raise ScanError(
            f"{source.url}: descriptor of tag {tag}{_tag_name(tag)} ref {ref} points at bytes "
            f"{offset}..{offset + length}, past the file's end ({source.size} bytes; "
            f"truncated file?): its objects reach at least byte {reach:,}, "
            f"{reach - source.size:,} bytes more than the file holds; copy or download it again"
        )
    return [Descriptor(tag, ref, offset, length) for tag, ref, offset, length in rows]


_TAG_NAMES = {
    106: "number type",
    300: "raster image dimensions",
    302: "raster image",
    306: "GR raster image",
    701: "SDS dimensions",
    702: "scientific data",
    720: "numeric data group",
    1962: "vdata header",
    1963: "vdata records",
    1965: "vgroup",
}
"""Names of the tags whose objects hold the bulk of a file (for error messages)."""


def _tag_name(tag: int) -> str:
    name = _TAG_NAMES.get(tag & ~SPECIAL_BIT)
    special = ", special element" if tag & SPECIAL_BIT else ""
    return f" ({name}{special})" if name else (f" ({special[2:]})" if special else "")
