"""Vgroups (tag 1965: a named, classed list of tag/ref pairs) and Vdatas (tag 1962 header,
tag 1963 records): the containers the SD interface and the chunk tables are built of."""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan.hdf4.dd import DDTable
from refzarr.scan.hdf4.elements import Contiguous, read_logical, resolve
from refzarr.scan.hdf4.numtypes import number_dtype
from refzarr.scan.hdf4.source import Source

__all__ = ["DFTAG_VG", "DFTAG_VH", "DFTAG_VS", "Field", "VData", "VGroup", "Vsets"]

DFTAG_VG, DFTAG_VH, DFTAG_VS = 1965, 1962, 1963
FULL_INTERLACE = 0


@dataclass(frozen=True, slots=True)
class VGroup:
    """A vgroup: its members (tag, ref) in order, name and class."""

    ref: int
    members: tuple[tuple[int, int], ...]
    name: str
    klass: str


@dataclass(frozen=True, slots=True)
class Field:
    """A Vdata field: name, HDF4 number type, values per record, offset in a record."""

    name: str
    type: int
    order: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class VData:
    """A Vdata header: records, record size, interlace, fields, name and class."""

    ref: int
    nrecords: int
    record_size: int
    interlace: int
    fields: tuple[Field, ...]
    name: str
    klass: str


def _text(raw: bytes) -> str:
    return raw.split(b"\0")[0].decode("utf-8", "replace")


class Vsets:
    """Parses (and keeps) the vgroups and vdata headers of one file."""

    def __init__(self, table: DDTable, source: Source) -> None:
        self.table = table
        self.source = source
        self._groups: dict[int, VGroup] = {}
        self._vdatas: dict[int, VData] = {}

    def group(self, ref: int) -> VGroup:
        """The vgroup ``ref``."""
        found = self._groups.get(ref)
        if found is None:
            found = self._groups[ref] = self._parse_group(ref)
        return found

    def vdata(self, ref: int) -> VData:
        """The vdata header ``ref``."""
        found = self._vdatas.get(ref)
        if found is None:
            found = self._vdatas[ref] = self._parse_vdata(ref)
        return found

    def _raw(self, tag: int, ref: int, what: str) -> bytes:
        dd = self.table.find(tag, ref, what)
        return self.source.read_range(dd.offset, max(dd.length, 0), what)

    def _parse_group(self, ref: int) -> VGroup:
        what = f"vgroup {ref}"
        raw = self._raw(DFTAG_VG, ref, what)
        try:
            (count,) = struct.unpack_from(">H", raw)
            values = struct.unpack_from(f">{2 * count}H", raw, 2)
            at = 2 + 4 * count
            name, at = _counted(raw, at)
            klass, at = _counted(raw, at)
        except struct.error as exc:
            raise ScanError(f"{self.source.url}: {what}: damaged vgroup record: {exc}") from exc
        members = tuple(zip(values[:count], values[count:], strict=True))
        return VGroup(ref, members, name, klass)

    def _parse_vdata(self, ref: int) -> VData:
        what = f"vdata {ref}"
        raw = self._raw(DFTAG_VH, ref, what)
        try:
            interlace, nrecords, record_size, nfields = struct.unpack_from(">hiHh", raw)
            if nfields < 0:
                raise ValueError(f"{nfields} fields")
            at = 10
            types = struct.unpack_from(f">{nfields}h", raw, at)
            sizes = struct.unpack_from(f">{nfields}H", raw, at + 2 * nfields)
            offsets = struct.unpack_from(f">{nfields}H", raw, at + 4 * nfields)
            orders = struct.unpack_from(f">{nfields}H", raw, at + 6 * nfields)
            at += 8 * nfields
            names = []
            for _ in range(nfields):
                name, at = _counted(raw, at)
                names.append(name)
            name, at = _counted(raw, at)
            klass, at = _counted(raw, at)
        except (struct.error, ValueError) as exc:
            raise ScanError(f"{self.source.url}: {what}: damaged vdata header: {exc}") from exc
        fields = tuple(
            Field(n, t, o, off, s)
            for n, t, o, off, s in zip(names, types, orders, offsets, sizes, strict=True)
        )
        return VData(ref, nrecords, record_size, interlace, fields, name, klass)

    def records(self, vdata: VData, what: str) -> np.ndarray[Any, Any]:
        """Every record of a vdata as a structured array (fields in their stored byte order)."""
        dtype = record_dtype(vdata, f"{self.source.url}: {what}")
        if vdata.nrecords <= 0 or not vdata.fields:
            return np.zeros(0, dtype=dtype)
        data = self.records_bytes(vdata, what)
        try:
            return self._unpack(vdata, dtype, data)
        except (ValueError, TypeError) as exc:
            raise ScanError(f"{self.source.url}: {what}: damaged vdata records: {exc}") from exc

    def _unpack(self, vdata: VData, dtype: np.dtype[Any], data: bytes) -> np.ndarray[Any, Any]:
        if vdata.interlace == FULL_INTERLACE:
            return np.frombuffer(data, dtype=dtype, count=vdata.nrecords).copy()
        out = np.zeros(vdata.nrecords, dtype=dtype)
        at = 0
        for f in vdata.fields:
            size = f.size * vdata.nrecords
            out[f.name] = np.frombuffer(data[at : at + size], dtype=dtype[f.name])
            at += size
        return out

    def records_bytes(self, vdata: VData, what: str) -> bytes:
        """The stored bytes of a vdata's records."""
        storage = self.records_storage(vdata, what)
        need = vdata.nrecords * vdata.record_size
        if storage.length < need:
            raise ScanError(
                f"{self.source.url}: {what}: {storage.length} bytes of records, {need} expected "
                "(truncated or damaged file?)"
            )
        return read_logical(self.source, storage, 0, need)

    def records_storage(self, vdata: VData, what: str) -> Contiguous:
        """Where a vdata's records are (plain or linked blocks in this file)."""
        dd = self.table.find(DFTAG_VS, vdata.ref, f"{what}: records")
        storage = resolve(self.table, self.source, dd, f"{what}: records")
        if not isinstance(storage, Contiguous):
            raise UnsupportedFeatureError(
                f"{self.source.url}: {what}: records stored as {type(storage).__name__.lower()}"
            )
        return storage


def _counted(raw: bytes, at: int) -> tuple[str, int]:
    """A string preceded by its 2-byte length, and the position after it."""
    (length,) = struct.unpack_from(">H", raw, at)
    end = at + 2 + length
    if end > len(raw):
        raise struct.error(f"a name of {length} bytes runs past the record")
    return _text(raw[at + 2 : end]), end


def record_dtype(vdata: VData, where: str) -> np.dtype[Any]:
    """The numpy dtype of one record (fields at their stored offsets)."""
    try:
        return _record_dtype(vdata.fields, vdata.interlace, vdata.record_size)
    except (ValueError, TypeError) as exc:
        raise ScanError(f"{where}: damaged vdata header ({vdata.name!r}): {exc}") from exc
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"{where}: {exc}") from exc


@functools.lru_cache(maxsize=256)
def _record_dtype(fields: tuple[Field, ...], interlace: int, record_size: int) -> np.dtype[Any]:
    """`record_dtype`, kept for the layouts a file repeats (every attribute of a type)."""
    names, formats, offsets = [], [], []
    for f in fields:
        base = number_dtype(f.type, where=f"field {f.name!r}")
        if base.kind == "S":
            formats.append(np.dtype(f"S{max(f.order, 1)}"))
        elif f.order > 1:
            formats.append(np.dtype((base, (f.order,))))
        else:
            formats.append(base)
        names.append(f.name)
        offsets.append(f.offset if interlace == FULL_INTERLACE else 0)
    if interlace != FULL_INTERLACE:
        offsets, at = [], 0
        for fmt in formats:
            offsets.append(at)
            at += fmt.itemsize
    size = sum(fmt.itemsize for fmt in formats)
    itemsize = max([record_size, size] if interlace == FULL_INTERLACE else [size])
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": itemsize})
