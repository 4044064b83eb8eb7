"""The global heap collections variable-length values point into, checked before h5py reads
them: a damaged object size in a collection makes the HDF5 library loop forever (found by
flipping bytes: tests/hostile/test_hdf5_flips.py).

Only what can be read without the HDF5 library is checked: the descriptors (length,
collection address, object index) of variable-length attributes (read from their object
header's messages), of compact datasets (from their layout message), of contiguous ones, and
of chunked ones whose filters refzarr decodes (deflate, shuffle, ...: the codecs the scanner
would reference them with); each collection they name is walked object by object from the File
Format Specification, with the file's sizes of offsets and lengths (2, 4 or 8 bytes). Datasets
of region references (collection address, object index: ``H5Rget_region`` reads the object)
are checked the same way in files with 8-byte offsets and refused in others. Checked
variable-length string attributes are then read from their collections (`heap_strings`).

Values whose descriptors cannot be found that way are refused before the HDF5 library reads
them (`UnsupportedFeatureError`): attributes whose message is stored in the file's shared
message table, compact datasets in object headers this reader cannot parse, chunks behind a
filter refzarr cannot decode, and variable-length values inside compound types or inside
other variable-length types (attributes of such types were always refused after reading; now
before). Left to the HDF5 library unchecked: the attributes of an object header this reader
cannot parse (e.g. dense storage larger than one B-tree leaf or one heap block), since
refusing them would refuse healthy files h5py writes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from math import prod
from typing import Any, NamedTuple

import h5py
import numpy as np
from h5py import h5a, h5d, h5t

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan.hdf5.ohdr import Superblock
from refzarr.scan.hdf5.types import creation_plist

__all__ = [
    "HeapFile",
    "attribute_heap_refusals",
    "check_global_heaps",
    "heap_file",
    "heap_strings",
]

ReadRange = Callable[[int, int], bytes]
CompactData = Callable[[], bytes | None]

NOT_CHECKED = (
    "its variable-length values cannot be checked before the HDF5 library reads them ({}); "
    "a damaged global heap makes that library loop forever, so they are not read"
)
"""Why values are refused when their descriptors cannot be found here (the reason in {})."""

NESTED = (
    "variable-length values inside compound types or inside other variable-length types are "
    "not supported (refused before the HDF5 library reads them from the global heap)"
)


_CELLS = {
    size: np.dtype([("length", "<u4"), ("address", f"<u{size}"), ("index", "<u4")])
    for size in (2, 4, 8)
}
"""A stored descriptor (length, collection address, object index), by size of offsets."""

_REGION_CELLS = {size: np.dtype([("address", f"<u{size}"), ("index", "<u4")]) for size in (2, 4, 8)}
"""A stored region reference (collection address, object index: the object holds the target's
address and the selection), by size of offsets."""


class _Unchecked(Exception):
    """The descriptors cannot be found here (the reason)."""


Spans = dict[int, tuple[int, int]]
"""The objects of one collection: (where its data starts in the collection, size) by index."""

Collections = dict[int, Spans | str]
"""The collections walked in one scan: their objects (`Spans`), or what is wrong, by
position."""


class HeapFile(NamedTuple):
    """What reading descriptors takes from the file: its sizes of offsets and lengths, where
    its addresses start (after the user block), and why they cannot be read here ("": they
    can; the sizes are then 8 and 8)."""

    sizes: tuple[int, int]
    base: int
    unchecked: str


def heap_file(f: h5py.File, superblock: Superblock | None = None) -> HeapFile:
    """`HeapFile` of ``f``, read once per scan (``h5py.Dataset.file`` builds a new File object
    on every call, and the creation property list is a new HDF5 object each time);
    ``superblock``: its superblock as refzarr read it, when it did (where HDF5 found it, the
    sizes HDF5 read: what HDF5 would be asked, without a new property list)."""
    if superblock is not None:
        sizes = (superblock.offset_size, superblock.length_size)
        if sizes[0] in _CELLS and sizes[1] in _CELLS:
            return HeapFile(sizes, superblock.base, "")
    plist = f.id.get_create_plist()
    base = int(plist.get_userblock())
    try:
        return HeapFile(_sizes(plist), base, "")
    except _Unchecked as exc:
        return HeapFile((8, 8), base, str(exc))


def check_global_heaps(
    ds: h5py.Dataset,
    file: HeapFile,
    read_range: ReadRange,
    size: int,
    where: str,
    compact: CompactData | None = None,
    walked: Collections | None = None,
) -> None:
    """Raise ScanError when a collection the dataset's values point into is damaged, and
    UnsupportedFeatureError when those values cannot be checked here (see the module).

    ``file``: `heap_file` of its file; ``read_range(offset, length)`` reads the file,
    ``size`` bytes long; ``compact()`` gives
    the raw data of a compact dataset (its layout message), None when it cannot;
    ``walked``: the collections walked so far in this scan (each is walked once).
    """
    sizes = file.sizes
    try:
        if file.unchecked:
            raise _Unchecked(file.unchecked)
        stored = list(_stored(ds, read_range, compact))
    except _Unchecked as exc:
        raise UnsupportedFeatureError(f"{where}: {NOT_CHECKED.format(exc)}") from None
    region = ds.id.get_type().get_class() == h5t.REFERENCE
    if region and sizes[0] != 8:  # stored otherwise than 12 bytes each: not read here
        why = f"region references in a file with offsets of {sizes[0]} bytes"
        raise UnsupportedFeatureError(f"{where}: {NOT_CHECKED.format(why)}")
    cell = (_REGION_CELLS if region else _CELLS)[sizes[0]]
    _check(file, stored, _Reader(read_range, size, walked), f"{where}: its", cell)


def attribute_heap_refusals(
    obj: h5py.HLObject,
    file: HeapFile,
    names: Iterable[str | bytes],
    data: Mapping[bytes, tuple[int | None, bytes]] | None,
    read_range: ReadRange,
    size: int,
    where: str,
    walked: Collections | None = None,
) -> dict[str | bytes, str]:
    """Check the collections the attributes ``names`` of ``obj`` (those h5py would read)
    point into: ScanError when one is damaged; the attributes that cannot be checked here,
    with the reason they are refused.

    ``data``: by name, the number of descriptors of each attribute message when its header
    says it and its stored bytes (what follows its datatype and dataspace; an attribute
    missing from it is refused), None when the object's header cannot be read here (its
    values are then left to h5py unchecked); ``file``, ``walked``: as `check_global_heaps`.
    """
    reader = _Reader(read_range, size, walked)
    sizes, unchecked = file.sizes, file.unchecked
    refused: dict[str | bytes, str] = {}
    checked: dict[str | bytes, bytes] = {}
    for name in names:
        key = name.encode("utf8") if isinstance(name, str) else name
        known, raw = (None, None) if data is None else data.get(key, (None, None))
        cells = _attribute_cells(obj.id, key) if known is None else known
        if not cells:
            continue
        need = cells * (8 + sizes[0])
        if cells < 0:
            refused[name] = NESTED
        elif unchecked:
            refused[name] = NOT_CHECKED.format(unchecked)
        elif data is None:
            continue
        elif raw is None or len(raw) < need:
            why = "its attribute message is in the file's shared message table"
            refused[name] = NOT_CHECKED.format(why)
        else:
            checked[name] = raw[:need]
    try:  # all at once; one by one to name the attribute only when a collection is damaged
        _check(file, checked.values(), reader, where)
    except ScanError:
        for name, raw in checked.items():
            _check(file, [raw], reader, f"{where}: attribute {name!r}: its")
        raise
    return refused


def heap_strings(
    file: HeapFile,
    wanted: Mapping[str, tuple[bytes, tuple[int, ...]]],
    read_range: ReadRange,
    walked: Collections,
) -> dict[str, Any]:
    """Variable-length string attributes of an object of ``file`` (its `heap_file`) read
    from their collections, as h5py
    reads them: a str (UTF-8, undecodable bytes as surrogate escapes), or an object array of
    those for a simple dataspace.

    ``wanted``: by name, the stored descriptors and the dimensions (() when scalar) of
    attributes whose collections `attribute_heap_refusals` checked (they are in ``walked``).
    Those left out of the result are for h5py to read (a string holding a NUL, a collection
    not walked). Each collection is read once, so reading n strings costs O(n) (HDF5 looks an
    attribute up by name by walking its object header: h5py reading them one by one costs
    O(n²)).
    """
    if file.unchecked:
        return {}
    offset_size, base = file.sizes[0], file.base
    collections: dict[int, bytes] = {}
    out: dict[str, Any] = {}
    for name, (raw, dims) in wanted.items():
        cells = np.frombuffer(raw, _CELLS[offset_size], prod(dims)).tolist()
        items = [_string(read_range, walked, collections, base + a, k, n) for n, a, k in cells]
        if None in items:
            continue
        out[name] = items[0] if not dims else np.array(items, dtype=object).reshape(dims)
    return out


def _string(
    read_range: ReadRange,
    walked: Collections,
    collections: dict[int, bytes],
    address: int,
    index: int,
    length: int,
) -> str | None:
    """One string of ``length`` bytes, object ``index`` of the collection at ``address``
    (read once into ``collections``); None when h5py must read it."""
    if not length:
        return ""
    spans = walked.get(address)
    if not isinstance(spans, dict) or spans.get(index, (0, -1))[1] < length:
        return None
    if address not in collections:
        collections[address] = read_range(address, max(a + n for a, n in spans.values()))
    start = spans[index][0]
    data = collections[address][start : start + length]
    if b"\0" in data:  # HDF5 gives C strings: h5py sees what comes before a NUL
        return None
    return data.decode("utf-8", errors="surrogateescape")


def _attribute_cells(oid: Any, name: bytes) -> int | None:
    """Descriptors in the value of attribute ``name`` (None: none; -1: nested ones)."""
    attr = h5a.open(oid, name)
    per_value = _heap_cells(attr.get_type())
    if per_value is None or per_value < 0:
        return per_value
    return per_value * int(attr.get_space().get_simple_extent_npoints())


def _heap_cells(tid: h5t.TypeID) -> int | None:
    """Descriptors in one value of ``tid`` (None: none; -1: some not at the top level)."""
    cls = tid.get_class()
    if cls == h5t.STRING:
        return 1 if tid.is_variable_str() else None
    if cls == h5t.VLEN:
        return -1 if _heap_cells(tid.get_super()) is not None else 1
    if cls == h5t.ARRAY:
        inner = _heap_cells(tid.get_super())
        if inner is None or inner < 0:
            return inner
        return inner * int(prod(tid.get_array_dims()))
    if cls == h5t.COMPOUND:
        members = range(tid.get_nmembers())
        return -1 if any(_heap_cells(tid.get_member_type(k)) is not None for k in members) else None
    return None


def _sizes(plist: h5py.h5p.PropFCID) -> tuple[int, int]:
    """The file's sizes of offsets and lengths (``plist``: its creation property list)."""
    offset, length = plist.get_sizes()
    if offset not in _CELLS or length not in _CELLS:
        raise _Unchecked(f"offsets of {offset} bytes and lengths of {length}")
    return int(offset), int(length)


class _Reader(NamedTuple):
    """The file's bytes and size, and the collections walked so far."""

    read_range: ReadRange
    size: int
    walked: Collections | None


def _check(
    file: HeapFile,
    stored: Iterable[bytes],
    reader: _Reader,
    what: str,
    cell: np.dtype[Any] | None = None,
) -> None:
    """ScanError when a collection the descriptors ``stored`` point into is damaged
    (``cell``: their layout, `_CELLS` by default; without a length, as region references,
    an object of any size must be there)."""
    base, sizes = file.base, file.sizes
    cell = _CELLS[sizes[0]] if cell is None else cell
    sized = "length" in (cell.names or ())
    wanted: dict[int, dict[int, int]] = {}
    for raw in stored:
        cells = np.frombuffer(raw[: len(raw) // cell.itemsize * cell.itemsize], dtype=cell)
        cells = cells[cells["address"] != 0]
        lengths = cells["length"] if sized else np.zeros(len(cells), int)
        for address, index, length in zip(
            cells["address"].tolist(),
            cells["index"].tolist(),
            lengths.tolist(),
            strict=True,
        ):
            objects = wanted.setdefault(address, {})
            objects[index] = max(objects.get(index, 0), length)
    for address, objects in wanted.items():
        reason = _damage(reader, base + address, objects, sizes[1])
        if reason:
            raise ScanError(
                f"{what} {'variable-length values' if sized else 'region references'} point "
                "into a damaged global heap "
                f"collection at byte {base + address}: {reason}"
            )


def _stored(
    ds: h5py.Dataset, read_range: ReadRange, compact: CompactData | None
) -> Iterator[bytes]:
    """The stored descriptors, chunk by chunk (`_Unchecked` when they cannot be read here)."""
    layout = creation_plist(ds).get_layout()
    if layout == h5d.COMPACT:
        raw = compact() if compact is not None else None
        if raw is None:
            raise _Unchecked("its compact data is in an object header refzarr does not read")
        yield raw
        return
    if layout == h5d.CONTIGUOUS:
        offset, nbytes = ds.id.get_offset(), ds.id.get_storage_size()
        if offset is not None and nbytes:
            yield read_range(int(offset), int(nbytes))
        return
    if layout != h5d.CHUNKED:
        raise _Unchecked("its values are in other datasets (a virtual dataset)")
    decode = _decoder(ds)
    for k in range(ds.id.get_num_chunks()):
        info = ds.id.get_chunk_info(k)
        data = read_range(int(info.byte_offset), int(info.size))
        yield decode(data, int(info.filter_mask))


def _decoder(ds: h5py.Dataset) -> Callable[[bytes, int], bytes]:
    """Undoes the dataset's filters on one stored chunk (``b""`` when it does not decode:
    h5py then says what is wrong); `_Unchecked` when refzarr has no codec for one of them
    (at once), or a chunk skips filters that do not map onto its codecs."""
    from numcodecs import get_codec

    from refzarr.codecs.hdf5.filters import filters_to_codecs
    from refzarr.scan.hdf5.layout import dataset_filters

    try:
        stages = dataset_filters(ds)
        codecs = [get_codec(dict(config)) for config in filters_to_codecs(stages, 16)]
    except Exception as exc:  # an unknown or unsupported filter
        raise _Unchecked(f"a filter refzarr cannot decode: {exc}") from None
    # a filter mask names HDF5's stages: it maps onto the codecs when each stage has one
    one_each = len(codecs) == len(stages)

    def decode(data: bytes, mask: int) -> bytes:
        if mask and not one_each:
            raise _Unchecked("a chunk skips filters refzarr decodes together")
        out: Any = data
        try:
            for k in reversed(range(len(codecs))):
                if not mask >> k & 1:
                    out = codecs[k].decode(out)
        except Exception:
            return b""
        return bytes(np.asarray(out).reshape(-1).view(np.uint8))

    return decode


def _damage(reader: _Reader, address: int, objects: dict[int, int], length_size: int = 8) -> str:
    """What is wrong with the collection at ``address`` ("" when nothing); lengths (the
    collection's size, each object's) are ``length_size`` bytes, each in a header of 16 (the
    length field padded to a multiple of 8 bytes)."""
    walked = {} if reader.walked is None else reader.walked
    found = walked.get(address)
    if found is None:
        found = walked[address] = _walk(reader, address, length_size)
    if isinstance(found, str):
        return found
    for index, length in objects.items():
        if found.get(index, (0, -1))[1] < length:
            return f"object {index} ({length} bytes) is not in it"
    return ""


def _walk(reader: _Reader, address: int, length_size: int) -> Spans | str:
    """The objects of the collection at ``address`` (`_objects`), or what is wrong."""
    head_size = _aligned(8 + length_size)
    if address + head_size > reader.size:
        return "it lies beyond the file's end"
    head = reader.read_range(address, head_size)
    if head[:4] != b"GCOL" or head[4] != 1:
        return "no GCOL signature (version 1)"
    total = int.from_bytes(head[8 : 8 + length_size], "little")
    if total < head_size or address + total > reader.size:
        return f"its size ({total} bytes) runs past the file's end"
    return _objects(reader.read_range(address, total), length_size)


def _objects(collection: bytes, length_size: int = 8) -> Spans | str:
    """Object index -> (start of its data, size), walked from the first object to the free
    space (or the end)."""
    out: Spans = {}
    head = _aligned(8 + length_size)  # index (2), reference count (2), reserved (4), size
    at, end = head, len(collection)
    while at + head <= end:
        (index,) = struct.unpack_from("<H", collection, at)
        length = int.from_bytes(collection[at + 8 : at + 8 + length_size], "little")
        if index == 0:
            return out if at + length == end else "its free space does not end it"
        if at + head + length > end:
            return f"object {index} ({length} bytes) runs past its end"
        if index in out:
            return f"object {index} is listed twice"
        out[index] = (at + head, length)
        at += head + -(-length // 8) * 8
    return out if at >= end or end - at < head else "its objects do not end it"


def _aligned(n: int) -> int:
    """``n`` rounded up to a multiple of 8 (HDF5 aligns the headers of collections and of
    their objects so)."""
    return -(-n // 8) * 8
