"""Differential fuzz of the netCDF3 scanner: random classic files written by netCDF4-python
(CDF-1, CDF-2, CDF-5) and by scipy.io.netcdf_file (CDF-1, CDF-2; it lays headers and records
out its own way), scanned by refzarr and compared with netCDF4-python's raw reading.

Compared: the header as our parser sees it, field by field (dimensions, record count,
variables, types, attributes) and byte for byte (the header rebuilt from what we parsed equals
the file's; the careful parser reads it as the quick one does); the scanned group (variable
order, dimension names, shapes, dtypes as stored, attributes and their types); every
variable's values, bit for bit, through refzarr's ReferenceStore, refzarr's own reader (the
`ArrayReader` behind ``open_dataset``), and fsspec ReferenceFileSystem + zarr on our kerchunk
JSON (and Parquet on a subset); on a third of the files, xarray's decoded view through refzarr
against ``xr.open_dataset(path)``. Scanner options are drawn too (small ``chunk_bytes`` cut
contiguous data into row chunks, ``inline_threshold``, ``inline_coordinates``). Records whose
count says "streaming" (all bits set) are made by patching a written file; the truth is then
the file before the patch.

Not drawn: a fixed dimension of length 0 (in netCDF3 length 0 is the record dimension, and a
file has one); names that are not UTF-8 (scipy writes names as Latin-1; netCDF4-python and
refzarr both refuse them).

``REFZARR_FUZZ_EXAMPLES=500 pytest tests/scan/netcdf3/test_netcdf3_fuzz.py`` explores more.
"""

from __future__ import annotations

import struct
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import scipy.io
import xarray as xr
import zarr
from hypothesis import given
from hypothesis import strategies as st
from nc3kit import (
    Truth,
    array,
    assert_attrs_equal,
    assert_decoded_matches,
    assert_group_matches,
    assert_raw_equal,
    read_truth,
)

import refzarr
from fuzzkit import fuzz_settings
from refzarr.io import RangeReader
from refzarr.reader.array import ArrayReader
from refzarr.scan.netcdf3 import NetCDF3Scanner
from refzarr.scan.netcdf3.header import STREAMING, Header, _Parser, parse_header
from refzarr.scan.netcdf3.types import NC_TYPES
from roundtrip import open_zarr_group

FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

CLASSIC = ("i1", "S1", "i2", "i4", "f4", "f8")
CDF5_ONLY = ("u1", "u2", "u4", "i8", "u8")
SMALL = ("i1", "S1", "i2")
"""Types whose records are not a multiple of 4 bytes: a file's only record variable of one of
them has unpadded records."""

_CODES = {np.dtype(dtype).newbyteorder("=").str: code for code, (dtype, _) in NC_TYPES.items()}
_CODES["|S1"] = 2


# -- the drawn file ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Var:
    """A variable to write: ``data`` None means never written; ``start`` is the first record
    a record variable's data goes to."""

    name: str
    dtype: str
    dims: tuple[str, ...]
    attrs: tuple[tuple[str, Any], ...]
    fill: Any
    data: np.ndarray | None
    start: int = 0


@dataclass(frozen=True)
class Spec:
    """A file to write: ``writer`` is a netCDF4-python format name or ``scipy1`` / ``scipy2``;
    ``dims`` in dimension-id order (length None: the record dimension)."""

    writer: str
    dims: tuple[tuple[str, int | None], ...]
    attrs: tuple[tuple[str, Any], ...]
    variables: tuple[Var, ...]
    fill_on: bool
    late_attrs: tuple[tuple[str, Any], ...]
    """Global attributes set after the data is written (netCDF-C then moves the data)."""

    @property
    def cdf5(self) -> bool:
        return self.writer == "NETCDF3_64BIT_DATA"

    @property
    def has_nul_text(self) -> bool:
        """Whether a text attribute holds NUL (shown without it: the header cannot be rebuilt
        from what is shown)."""
        pairs = [*self.attrs, *self.late_attrs, *(a for v in self.variables for a in v.attrs)]
        texts = [
            v.encode() if isinstance(v, str) else v for _, v in pairs if isinstance(v, str | bytes)
        ]
        return any(b"\x00" in text or not text for text in texts)


_FIRST = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\u00e9\u00df\u03a9\u4e2d\U0001f600"
_LATER = _FIRST + "0123456789_-.+@ \u00f1"


def _names(unicode: bool) -> st.SearchStrategy[str]:
    first, later = (_FIRST, _LATER) if unicode else (_FIRST[:52], _LATER[:52] + "0123456789_-.")
    return st.builds(
        lambda a, b: (a + b).rstrip(" "),
        st.sampled_from(first),
        st.text(alphabet=later, max_size=6),
    )


def _values(dtype: str, n: int) -> st.SearchStrategy[np.ndarray]:
    """``n`` values of ``dtype``, any bit pattern (NaN payloads, infinities, -0.0)."""
    size = np.dtype(dtype).itemsize
    return st.binary(min_size=n * size, max_size=n * size).map(
        lambda raw: np.frombuffer(raw, np.dtype(dtype).newbyteorder(">")).astype(dtype)
    )


def _text_attribute(scipy: bool) -> st.SearchStrategy[Any]:
    if scipy:  # scipy writes bytes as they are (any bytes: not UTF-8 too)
        return st.binary(max_size=9)
    text = st.text(alphabet="ab \u00e9\u4e2d\U0001f600\x00\n", max_size=9)
    long = st.sampled_from(["x" * 65537, "y" * 70001])  # a header longer than the first read
    return st.integers(0, 9).flatmap(lambda k: long if k == 0 else text)


def _attribute(types: Sequence[str], scipy: bool) -> st.SearchStrategy[Any]:
    numeric = st.sampled_from([t for t in types if t != "S1"]).flatmap(
        lambda t: st.integers(0 if not scipy else 1, 4).flatmap(lambda n: _values(t, n))
    )
    return st.one_of(_text_attribute(scipy), numeric)


def _attributes(
    names: st.SearchStrategy[str], types: Sequence[str], scipy: bool, max_size: int = 4
) -> st.SearchStrategy[tuple[tuple[str, Any], ...]]:
    cf = st.sampled_from(["units", "scale_factor", "missing_value", "valid_range", "_Unsigned"])
    return st.lists(
        st.tuples(st.one_of(names, cf), _attribute(types, scipy)),
        max_size=max_size,
        unique_by=lambda pair: pair[0],
    ).map(tuple)


@st.composite
def specs(draw: st.DrawFn, writers: Sequence[str], single_small_record: bool = False) -> Spec:
    """A random netCDF3 file (see `Spec`)."""
    writer = draw(st.sampled_from(writers))
    scipy = writer.startswith("scipy")
    types = CLASSIC + (CDF5_ONLY if writer == "NETCDF3_64BIT_DATA" else ())
    names = _names(unicode=not scipy)
    fixed = draw(st.lists(st.integers(1, 4), max_size=4))
    unlimited = single_small_record or draw(st.booleans())
    ndims = len(fixed) + unlimited
    dim_names = draw(st.lists(names, min_size=ndims, max_size=ndims, unique=True))
    lengths: list[int | None] = list(fixed)
    if unlimited:
        # netCDF-C lets the record dimension have any id; scipy only the first
        lengths.insert(0 if scipy else draw(st.integers(0, len(fixed))), None)
    dims = tuple(zip(dim_names, lengths, strict=True))
    fixed_names = [n for n, length in dims if length is not None]
    record = next((n for n, length in dims if length is None), None)
    nrecs = draw(st.integers(0, 5))
    many = draw(st.integers(0, 9)) == 0
    nvars = draw(st.integers(0, 40 if many else 7))
    var_names = draw(
        st.lists(
            st.one_of(names, st.sampled_from(dim_names)) if dim_names else names,
            max_size=nvars,
            unique=True,
        )
    )
    single_at = draw(st.integers(0, len(var_names))) if single_small_record else -1
    if single_small_record:
        var_names.insert(single_at, draw(names.filter(lambda n: n not in var_names)))
    variables = []
    for k, name in enumerate(var_names):
        if single_small_record:
            is_record = k == single_at
            dtype = draw(st.sampled_from(SMALL if is_record else types))
        else:
            is_record = record is not None and draw(st.booleans())
            dtype = draw(st.sampled_from(types))
        repeats = draw(st.integers(0, 7)) == 0  # netCDF lets a variable use a dimension twice
        inner = tuple(
            draw(st.lists(st.sampled_from(fixed_names), max_size=3, unique=not repeats))
            if fixed_names
            else []
        )
        if name in fixed_names and draw(st.booleans()):
            inner, is_record = (name,), False  # a coordinate variable
        elif name == record and draw(st.booleans()):
            inner, is_record = (), True
        if scipy and record is not None and not (is_record or inner):
            # scipy writes scalars after the record variables, over their records (its bug)
            is_record = True
        dims_of = ((record,) if is_record else ()) + inner
        shape = tuple(dict(dims)[d] or 0 for d in inner)
        written = draw(st.integers(0, 3)) > 0
        start, data = 0, None
        if written:
            count = draw(st.integers(0, nrecs)) if is_record else None
            if is_record and count is not None:
                start = draw(st.integers(0, nrecs - count))
                shape = (count, *shape)
            data = draw(_values(dtype, int(np.prod(shape)))).reshape(shape)
        fill = None
        if dtype != "S1" and draw(st.integers(0, 3)) == 0:
            # scipy writes a _FillValue of any type (netCDF-C converts it to the variable's)
            kind = draw(st.sampled_from([dtype, "i1", "i2", "i4", "f4", "f8"])) if scipy else dtype
            fill = draw(_values(kind, 1))[0]
        attrs = draw(_attributes(names, types, scipy, max_size=3))
        attrs = tuple(pair for pair in attrs if pair[0] != "_FillValue")
        variables.append(Var(name, dtype, dims_of, attrs, fill, data, start))
    attrs = draw(_attributes(names, types, scipy))
    late = () if scipy else draw(_attributes(names, types, scipy, max_size=2))
    late = tuple(pair for pair in late if pair[0] not in dict(attrs))
    return Spec(writer, dims, attrs, tuple(variables), draw(st.booleans()), late)


# -- writing it -------------------------------------------------------------------------------


def write_netcdf4(path: Path, spec: Spec) -> None:
    with netCDF4.Dataset(path, "w", format=spec.writer) as ds:
        ds.set_auto_maskandscale(False)
        ds.set_auto_chartostring(False)
        ds.set_fill_on() if spec.fill_on else ds.set_fill_off()
        for name, length in spec.dims:
            ds.createDimension(name, length)
        for name, value in spec.attrs:
            ds.setncattr(name, value)
        created = []
        for var in spec.variables:
            made = ds.createVariable(var.name, var.dtype, var.dims, fill_value=var.fill)
            made.set_auto_maskandscale(False)
            made.set_auto_chartostring(False)
            for name, value in var.attrs:
                made.setncattr(name, value)
            created.append(made)
        for var, made in zip(spec.variables, created, strict=True):
            if var.data is None:
                continue
            if var.dims and var.dims[0] == _record(spec):
                if var.data.shape[0]:
                    made[var.start : var.start + var.data.shape[0]] = var.data
            else:
                made[...] = var.data
        for name, value in spec.late_attrs:
            ds.setncattr(name, value)


def _record(spec: Spec) -> str | None:
    return next((n for n, length in spec.dims if length is None), None)


def write_scipy(path: Path, spec: Spec) -> None:
    with scipy.io.netcdf_file(path, "w", version=int(spec.writer[-1])) as f:
        for name, length in spec.dims:
            f.createDimension(name, length)
        for name, value in spec.attrs:
            f._attributes[name] = value
        rec = _record(spec)
        records = [v for v in spec.variables if v.dims[:1] == (rec,)]
        nrecs = max((len(v.data) for v in records if v.data is not None), default=0)
        if len(records) > 1:
            # without records scipy writes every record variable at the same offset, which
            # netCDF-C refuses (refzarr reads those files: no record, no data; see below)
            nrecs = max(nrecs, 1)
        for var in spec.variables:
            made = f.createVariable(var.name, np.dtype(var.dtype), var.dims)
            if var.fill is not None:
                made._attributes["_FillValue"] = var.fill
            for name, value in var.attrs:
                made._attributes[name] = value
            if var.dims[:1] == (rec,):
                # every record variable as long as the longest: scipy sizes a record from a
                # variable's own data, so a shorter one would overlap the next (scipy's bug)
                if nrecs:
                    data = np.zeros((nrecs, *made.shape[1:]), made.data.dtype)
                    if var.data is not None:
                        data[: len(var.data)] = var.data
                    made[:nrecs] = data
            elif var.data is not None:
                made[...] = var.data
            else:  # scipy leaves np.empty's bytes: make them known
                made[...] = np.zeros(made.shape, made.data.dtype)


def write(path: Path, spec: Spec) -> Path:
    if not spec.writer.startswith("scipy"):
        write_netcdf4(path, spec)
        return path
    with warnings.catch_warnings():
        # scipy casts a _FillValue of another type to pad with: it may overflow (its warning)
        warnings.simplefilter("ignore", RuntimeWarning)
        write_scipy(path, spec)
    return path


# -- comparing --------------------------------------------------------------------------------


def assert_header_matches(path: Path, header: Header, truth: Truth, where: str) -> None:
    """Our parsed header against netCDF4-python's view of it, field by field."""
    unlimited = None
    with netCDF4.Dataset(path) as ds:
        assert [d.name for d in header.dimensions] == list(ds.dimensions), where
        for dim, theirs in zip(header.dimensions, ds.dimensions.values(), strict=True):
            if theirs.isunlimited():
                unlimited = dim.name
                assert dim.length == 0, f"{where}: {dim}"
            else:
                assert dim.length == len(theirs), f"{where}: {dim}"
        if unlimited is not None and header.numrecs != STREAMING:
            assert header.numrecs == len(ds.dimensions[unlimited]), where
        assert [v.name for v in header.variables] == list(ds.variables), where
        for var in header.variables:
            theirs = ds.variables[var.name]
            names = tuple(header.dimensions[d].name for d in var.dimids)
            assert names == theirs.dimensions, f"{where}: {var.name}"
            stored = NC_TYPES[var.nc_type][0]
            assert stored.newbyteorder("=") == theirs.dtype, f"{where}: {var.name}"
    # types recorded for JSON's sake, then as netCDF4-python shows them
    assert_attrs_equal(_with_types(header.attributes, header.types), truth.attributes, where)
    for var in header.variables:
        expected = truth.variables[var.name][2]
        assert_attrs_equal(_with_types(var.attributes, var.types), expected, f"{where}: {var}")


def _with_types(attrs: dict[str, Any], types: dict[str, str]) -> dict[str, Any]:
    return {"_nczarr_attr": {"types": types}, **attrs} if types else dict(attrs)


def rebuild_header(header: Header, truth: Truth) -> bytes:
    """The header's bytes as the format specification lays them out, from what we parsed
    (attribute types as netCDF4-python reports them: JSON loses some)."""
    wide = header.version == 5
    count = ">Q" if wide else ">I"

    def number(n: int) -> bytes:
        return struct.pack(count, n)

    def name(text: str) -> bytes:
        raw = text.encode("utf-8")
        return number(len(raw)) + raw + bytes(-len(raw) % 4)

    def attributes(
        attrs: dict[str, Any], theirs: dict[str, Any], kept: dict[str, tuple[int, ...]]
    ) -> bytes:
        if not attrs:
            return bytes(8 if not wide else 12)
        out = struct.pack(">I", 0x0C) + number(len(attrs))
        for key, value in attrs.items():
            if isinstance(value, str):  # bytes that are not UTF-8 as kept
                raw = bytes(kept[key]) if key in kept else value.encode("utf-8")
                code, n = 2, len(raw)
            else:
                dtype = np.asarray(theirs[key]).dtype
                values = np.asarray(value, dtype=dtype.newbyteorder(">")).reshape(-1)
                if dtype.kind == "f":  # NaN payloads are not kept (JSON has one NaN)
                    shown = np.asarray(theirs[key], dtype=values.dtype).reshape(-1)
                    values = np.where(np.isnan(values), shown, values).astype(shown.dtype)
                raw, code, n = values.tobytes(), _CODES[dtype.str], values.size
            out += name(key) + struct.pack(">I", code) + number(n) + raw + bytes(-len(raw) % 4)
        return out

    numrecs = (1 << (64 if wide else 32)) - 1 if header.numrecs == STREAMING else header.numrecs
    out = b"CDF" + bytes([header.version]) + number(numrecs)
    if header.dimensions:
        out += struct.pack(">I", 0x0A) + number(len(header.dimensions))
        out += b"".join(name(d.name) + number(d.length) for d in header.dimensions)
    else:
        out += bytes(8 if not wide else 12)
    out += attributes(header.attributes, truth.attributes, header.kept)
    if not header.variables:
        return out + bytes(8 if not wide else 12)
    out += struct.pack(">I", 0x0B) + number(len(header.variables))
    for var in header.variables:
        out += name(var.name) + number(len(var.dimids))
        out += b"".join(number(d) for d in var.dimids)
        out += attributes(var.attributes, truth.variables[var.name][2], var.kept)
        out += struct.pack(">I", var.nc_type) + number(var.vsize)
        out += struct.pack(">Q" if header.version != 1 else ">I", var.begin)
    return out


def _bits(values: np.ndarray) -> bytes:
    stored = values.dtype if values.dtype.itemsize == 1 else values.dtype.newbyteorder(">")
    return np.ascontiguousarray(values, dtype=stored).tobytes()


def assert_same_bits(got: np.ndarray, expected: np.ndarray, where: str) -> None:
    assert got.shape == expected.shape, f"{where}: shape {got.shape} != {expected.shape}"
    assert got.dtype.newbyteorder("=") == expected.dtype.newbyteorder("="), where
    assert _bits(got) == _bits(expected), f"{where}: {got!r} != {expected!r}"


def assert_scan_matches(
    path: Path, truth: Truth, scanner: NetCDF3Scanner, tmp: Path, parquet: bool, where: str
) -> None:
    """The scanned group's layout and every variable's values, read every way."""
    group = scanner(str(path))
    assert_group_matches(group, truth, where)
    for name, arr in group.arrays():
        ends = arr.manifest.offset.astype(np.int64) + arr.manifest.length.astype(np.int64)
        if arr.manifest.paths and ends.size:
            assert int(ends.max()) <= path.stat().st_size, f"{where}: {name} leaves the file"
    # refzarr's ReferenceStore through zarr (raw, stored byte order)
    root = zarr.open_group(refzarr.ReferenceStore(group), mode="r", zarr_format=2)
    for name, (_, expected, _) in truth.variables.items():
        got = np.asarray(root[name][...])  # type: ignore[index]
        assert_raw_equal(got, expected, f"{where} via ReferenceStore: {name}")
        assert_same_bits(got, expected, f"{where} via ReferenceStore: {name}")
    # refzarr's own reader (what `open_dataset` reads with; not through xarray, which
    # refuses some netCDF3 files: a scalar variable named like a dimension)
    reader = RangeReader()
    for name, (_, expected, _) in truth.variables.items():
        got = ArrayReader(array(group, name), name, reader, threads=1).read()
        assert_same_bits(got, expected, f"{where} via ArrayReader: {name}")
    # fsspec ReferenceFileSystem + zarr on the JSON (and Parquet)
    for suffix in (".json", ".parq") if parquet else (".json",):
        target = tmp / f"refs{suffix}"
        refzarr.write(group, target)
        other = open_zarr_group(target)
        for name, (_, expected, attrs) in truth.variables.items():
            node = other[name]
            assert isinstance(node, zarr.Array)
            how = f"{where} via fsspec+zarr{suffix}: {name}"
            got = np.asarray(node[...])
            assert_raw_equal(got, expected, how)
            assert_same_bits(got, expected, how)
            mine = {k: v for k, v in node.attrs.asdict().items() if k != "_ARRAY_DIMENSIONS"}
            assert_attrs_equal(mine, attrs, how)
        assert_attrs_equal(other.attrs.asdict(), truth.attributes, f"{where}{suffix}: global")


def check_file(
    path: Path, spec: Spec | None, options: dict[str, Any], parquet: bool, decoded: bool = False
) -> None:
    where = f"{path.name} {options}"
    truth = read_truth(path)
    data = path.read_bytes()
    header = parse_header(data, len(data), str(path))
    # the careful parser (which runs when the quick one is unsure) reads sound files alike
    careful = _Parser(data, len(data), str(path), data[3]).header()
    assert repr(careful) == repr(header), where  # repr: NaN attributes compare unequal
    assert_header_matches(path, header, truth, where)
    if spec is None or not spec.has_nul_text:
        rebuilt = rebuild_header(header, truth)
        stored = data[: header.size]
        first = next(
            (k for k, (a, b) in enumerate(zip(rebuilt, stored, strict=False)) if a != b), None
        )
        assert rebuilt == stored, (
            f"{where}: the header rebuilt differs from byte {first} "
            f"(lengths {len(rebuilt)}, {len(stored)}): {rebuilt[first or 0 :][:32]!r} "
            f"!= {stored[first or 0 :][:32]!r}"
        )
    scanner = NetCDF3Scanner(**options)
    assert_scan_matches(path, truth, scanner, path.parent, parquet, where)
    if decoded:
        assert_decoded_if_xarray_reads(path, scanner)


def assert_decoded_if_xarray_reads(path: Path, scanner: NetCDF3Scanner) -> None:
    """xarray's decoded view through refzarr equals ``xr.open_dataset(path)``, when xarray
    reads the file (not: a scalar variable named like a dimension, ...); xarray's warnings
    about odd attributes (``_Unsigned`` on floats, ...) are its own, the same both ways."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with xr.open_dataset(path) as direct:
                direct.load()
                unused = set(direct.encoding.get("unlimited_dims", ())) - set(direct.dims)
        except Exception:  # xarray refuses the file itself
            return
        if unused:  # a record dimension no variable uses: Zarr has no place for it (docs)
            return
        assert_decoded_matches(scanner(str(path)), path)


_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "chunk_bytes": st.integers(1, 64),
        "inline_threshold": st.integers(0, 64),
        "inline_coordinates": st.sampled_from([0, 3, 16, 65536]),
    },
)

NC4_WRITERS = ("NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA")
SCIPY_WRITERS = ("scipy1", "scipy2")


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True once in ``n`` draws (Parquet, xarray's decoded view: the slower checks)."""
    return st.integers(0, n - 1).map(lambda k: k == 0)


def _run(spec: Spec, options: dict[str, Any], parquet: bool, decoded: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="fuzznc3-") as tmp:
        path = write(Path(tmp) / "drawn.nc", spec)
        check_file(path, spec, options, parquet, decoded)


@FASTPARQUET
@fuzz_settings(ci_examples=10)
@given(spec=specs(NC4_WRITERS), options=_OPTIONS, parquet=one_in(8), decoded=one_in(3))
def test_netcdf4_written_files(
    spec: Spec, options: dict[str, Any], parquet: bool, decoded: bool
) -> None:
    _run(spec, options, parquet, decoded)


@FASTPARQUET
@fuzz_settings(ci_examples=10)
@given(spec=specs(SCIPY_WRITERS), options=_OPTIONS, parquet=one_in(8), decoded=one_in(3))
def test_scipy_written_files(
    spec: Spec, options: dict[str, Any], parquet: bool, decoded: bool
) -> None:
    _run(spec, options, parquet, decoded)


@fuzz_settings(ci_examples=5)
@given(
    spec=specs(NC4_WRITERS + SCIPY_WRITERS, single_small_record=True),
    options=_OPTIONS,
)
def test_single_small_record_variable(spec: Spec, options: dict[str, Any]) -> None:
    """A file's only record variable of byte, char or short: its records are not padded."""
    _run(spec, options, parquet=False)


@fuzz_settings(ci_examples=5)
@given(
    spec=specs(NC4_WRITERS + SCIPY_WRITERS),
    options=_OPTIONS,
    tail=st.sampled_from([0, 0, 1, 3]),
)
def test_streaming_record_count(spec: Spec, options: dict[str, Any], tail: int) -> None:
    """The record count patched to "streaming" (all bits set): read as the count the file
    holds. The truth is the file before the patch (netCDF-C takes the value literally);
    ``tail`` bytes appended stand for a last record not yet whole."""
    with tempfile.TemporaryDirectory(prefix="fuzznc3-") as tmp:
        path = write(Path(tmp) / "drawn.nc", spec)
        truth = read_truth(path)
        data = bytearray(path.read_bytes())
        width = 8 if data[3] == 5 else 4
        data[4 : 4 + width] = b"\xff" * width
        streamed = Path(tmp) / "streamed.nc"
        streamed.write_bytes(bytes(data) + bytes(tail))
        header = parse_header(bytes(data), len(data), str(streamed))
        assert header.numrecs == STREAMING
        group = NetCDF3Scanner(**options)(str(streamed))
        held = records_held(header, truth, len(data) + tail)
        root = zarr.open_group(refzarr.ReferenceStore(group), mode="r", zarr_format=2)
        rec = _record(spec)
        for name, (dims, expected, _) in truth.variables.items():
            got = np.asarray(root[name][...])  # type: ignore[index]
            if dims[:1] == (rec,):
                assert got.shape[0] == held, f"{options} tail {tail}: {name}: {got.shape}"
                got = got[: expected.shape[0]]  # records more: bytes after the last one
            assert_same_bits(got, expected, f"{options} tail {tail}: {name}")


def records_held(header: Header, truth: Truth, size: int) -> int:
    """Records a streamed file of ``size`` bytes holds, by the format specification: records
    of the record variables' slabs each padded to 4 bytes (unpadded for a file's only record
    variable), the last one counted when its variables' data is all there."""
    slabs = {}
    for var in header.variables:
        _, values, _ = truth.variables[var.name]
        if var.dimids and header.dimensions[var.dimids[0]].length == 0:
            slabs[var.name] = (var.begin, int(np.prod(values.shape[1:])) * values.itemsize)
    if not slabs:
        return 0
    sizes = [n for _, n in slabs.values()]
    recsize = sizes[0] if len(sizes) == 1 else sum(n + -n % 4 for n in sizes)
    first = min(begin for begin, _ in slabs.values())
    data_end = max(begin - first + n for begin, n in slabs.values())
    if recsize == 0 or size <= first:
        return 0
    full, rest = divmod(size - first, recsize)
    return full + (rest >= data_end)


# -- regression tests of what the fuzz found ----------------------------------------------------


def test_empty_numeric_attributes_keep_their_type(tmp_path: Path) -> None:
    """An attribute of no values has no type in JSON: an empty ``int64`` one read back as
    float64 (found by the fuzz; now its type is recorded, as for every empty number)."""

    def write(ds: netCDF4.Dataset) -> None:
        ds.createDimension("x", 2)
        ds.setncattr("none_int64", np.array([], "i8"))
        ds.setncattr("none_double", np.array([], "f8"))
        var = ds.createVariable("v", "i2", ("x",))
        var.setncattr("none_short", np.array([], "i2"))
        var.setncattr("none_uint64", np.array([], "u8"))
        var[:] = [1, 2]

    path = tmp_path / "empty.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_DATA") as ds:
        write(ds)
    group = refzarr.scan(path)
    truth = read_truth(path)
    assert_group_matches(group, truth, "empty")  # types applied, as refzarr's engine does
    with refzarr.open_dataset(group) as ours:
        assert ours.attrs["none_int64"].dtype == np.dtype("int64")
        assert ours["v"].attrs["none_uint64"].dtype == np.dtype("uint64")
    check_file(path, None, {}, parquet=False)


def _two_variables(path: Path, record: bool) -> Path:
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("t", None)
        ds.createDimension("x", 2)
        dims = ("t", "x") if record else ("x",)
        ds.createVariable("a", "i4", dims)[...] = np.array([[1, 2]])
        ds.createVariable("b", "i4", dims)[...] = np.array([[3, 4]])
    return path


@pytest.mark.parametrize("record", [False, True])
def test_variables_overlapping_in_the_header_are_refused(tmp_path: Path, record: bool) -> None:
    """A damaged header whose second variable starts where the first does: netCDF-C refuses
    the file (``NC_check_voffs``); refzarr read the first variable's values as the second's,
    in silence (found by the fuzz, through scipy's files below)."""
    path = _two_variables(tmp_path / "overlap.nc", record)
    data = bytearray(path.read_bytes())
    header = parse_header(bytes(data), len(data), str(path))
    first, second = (v.begin for v in header.variables)
    at = data.rindex(struct.pack(">I", second), 0, header.size)
    data[at : at + 4] = struct.pack(">I", first)
    path.write_bytes(bytes(data))
    with pytest.raises(OSError, match="Unknown file format"):
        netCDF4.Dataset(path)
    with pytest.raises(
        refzarr.ScanError,
        match=rf"variable 'b' starts at byte {first}, before the end of variable 'a' "
        rf"\(bytes {first}\.\.{first + 8}\), which precedes it in the header",
    ):
        refzarr.scan(path)


def test_scipy_record_variables_without_records(tmp_path: Path) -> None:
    """scipy writes every record variable at one offset when there is no record, a file
    netCDF-C refuses; no byte of them is referenced, so refzarr reads it as scipy does."""
    path = tmp_path / "norecords.nc"
    with scipy.io.netcdf_file(path, "w", version=2) as f:
        f.createDimension("t", None)
        f.createDimension("x", 3)
        f.createVariable("a", "i4", ("t", "x"))
        f.createVariable("b", "f8", ("t",))
        f.createVariable("c", "i2", ("x",))[:] = [1, 2, 3]
    with pytest.raises(OSError, match="Unknown file format"):
        netCDF4.Dataset(path)
    group = refzarr.scan(path)
    root = zarr.open_group(refzarr.ReferenceStore(group), mode="r", zarr_format=2)
    with scipy.io.netcdf_file(path, "r", mmap=False) as f:
        assert list(group.members) == list(f.variables)
        for name, var in f.variables.items():
            assert_same_bits(np.asarray(root[name][...]), var.data, name)  # type: ignore[index]


def test_scipy_latin1_names_are_refused_as_netcdf4_refuses_them(tmp_path: Path) -> None:
    """scipy writes names as Latin-1: a name that is not UTF-8, which netCDF4-python cannot
    decode; refzarr says so (loud both ways, so the fuzz draws ASCII names for scipy)."""
    path = tmp_path / "latin1.nc"
    with scipy.io.netcdf_file(path, "w") as f:
        f.createDimension("x", 2)
        f.createVariable("t\xe9", "i4", ("x",))[:] = [1, 2]
    with pytest.raises(UnicodeDecodeError):
        netCDF4.Dataset(path)
    with pytest.raises(refzarr.ScanError, match=r"the name of variable 0 is not UTF-8: b't\\xe9'"):
        refzarr.scan(path)
