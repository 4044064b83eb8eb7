"""Declared-shape bombs through every scanner: small files whose headers declare 2**31 ..
2**64 elements, 2**56 tiles or 10**12 string repeats. Each scan costs what the file holds
(a sparse manifest of its written chunks) or raises a named error saying what is wrong,
in bounded time and memory; nothing is allocated by declared size."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from test_shape_bombs import bounded

import refzarr
from fitscards import card, fits_header
from refzarr.model import sparse as sparse_module

# -- netCDF3 --------------------------------------------------------------------------------

Dim = tuple[str, int]
Var = tuple[str, list[int], int]  # name, dimension ids, nc_type


def netcdf3(dims: list[Dim], variables: list[Var], numrecs: int = 0, version: int = 1) -> bytes:
    """A classic (1), 64-bit offset (2) or CDF-5 (5) header, then 64 bytes of data."""
    count = ">Q" if version == 5 else ">I"
    offset = ">Q" if version in (2, 5) else ">I"

    def name(text: str) -> bytes:
        raw = text.encode()
        return struct.pack(count, len(raw)) + raw + b"\0" * (-len(raw) % 4)

    head = b"CDF" + bytes([version]) + struct.pack(count, numrecs)
    head += struct.pack(">I", 0x0A) + struct.pack(count, len(dims))
    head += b"".join(name(n) + struct.pack(count, size) for n, size in dims)
    head += struct.pack(">I", 0) + struct.pack(count, 0)  # no global attributes
    head += struct.pack(">I", 0x0B) + struct.pack(count, len(variables))
    parts = [
        name(n)
        + struct.pack(count, len(ids))
        + b"".join(struct.pack(count, i) for i in ids)
        + struct.pack(">I", 0)
        + struct.pack(count, 0)
        + struct.pack(">I", nc_type)
        + struct.pack(count, 4)  # vsize: ignored (netCDF-C recomputes it)
        for n, ids, nc_type in variables
    ]
    begin = len(head) + sum(len(p) + struct.calcsize(offset) for p in parts)
    return head + b"".join(p + struct.pack(offset, begin) for p in parts) + b"\0" * 64


NETCDF3 = {
    "fixed-2p31": (netcdf3([("x", 2**31 - 1)], [("v", [0], 1)]), "'v' needs bytes"),
    "fixed-2p62": (
        netcdf3([("x", 2**31 - 1), ("y", 2**31 - 1)], [("v", [0, 1], 1)]),
        "'v' needs bytes",
    ),
    "numrecs-2p31": (
        netcdf3([("t", 0), ("x", 4)], [("v", [0, 1], 5), ("w", [0, 1], 5)], numrecs=2**31 - 1),
        "2147483647 records",
    ),
    "cdf5-2p62": (netcdf3([("x", 2**62)], [("v", [0], 1)], version=5), "'v' needs bytes"),
    "cdf5-numrecs-2p62": (
        netcdf3([("t", 0), ("x", 1)], [("v", [0, 1], 1)], numrecs=2**62, version=5),
        "4611686018427387904 records",
    ),
    "cdf5-2p80": (
        netcdf3([("x", 2**40), ("y", 2**40)], [("v", [0, 1], 1)], version=5),
        r"more than 2\*\*63 bytes",
    ),
    "1000-dimensions": (
        netcdf3([("x", 2**31 - 1)], [("v", [0] * 1000, 1)]),
        r"1000 dimensions of more than 2\*\*63 bytes",
    ),
}


@pytest.mark.parametrize("name", sorted(NETCDF3))
def test_netcdf3_headers_declaring_huge_variables(tmp_path: Path, name: str) -> None:
    data, says = NETCDF3[name]
    path = tmp_path / f"{name}.nc"
    path.write_bytes(data)
    assert path.stat().st_size < 5000
    with pytest.raises(refzarr.ScanError, match=rf"{name}\.nc: .*{says}"):
        bounded(lambda: refzarr.scan(path))


# -- TIFF -------------------------------------------------------------------------------------

SHORT, LONG, LONG8 = 3, 4, 16
Tag = tuple[int, int, int, Any]


def tiff(tags: list[Tag], *, big: bool = False) -> bytes:
    """A one-IFD (Big)TIFF of ``tags`` (tag, type, count, value or raw bytes), then 256 bytes."""
    head, at, entry, count, word = (
        (b"II+\x00" + struct.pack("<HHQ", 8, 0, 16), 16, "<HHQ", "<Q", 8)
        if big
        else (b"II*\x00" + struct.pack("<I", 8), 8, "<HHI", "<H", 4)
    )
    data_at = at + struct.calcsize(count) + len(tags) * (struct.calcsize(entry) + word) + word
    body, entries = b"", b""
    for tag, kind, n, value in sorted(tags):
        fmt = {SHORT: "H", LONG: "I", LONG8: "Q"}[kind]
        raw = value if isinstance(value, bytes) else struct.pack("<" + fmt, value)
        if len(raw) <= word and not isinstance(value, bytes):
            field = raw + b"\0" * (word - len(raw))
        else:
            field = struct.pack("<Q" if big else "<I", data_at + len(body))
            body += raw
        entries += struct.pack(entry, tag, kind, n) + field
    ifd = struct.pack(count, len(tags)) + entries + b"\0" * word
    return head + ifd + body + b"\x07" * 256


GRAY = [(258, SHORT, 1, 8), (259, SHORT, 1, 1), (262, SHORT, 1, 1), (277, SHORT, 1, 1)]


def _tiled(width: int, height: int, kind: int, offsets: int = 1) -> list[Tag]:
    size = LONG8 if kind == LONG8 else LONG
    return [
        (256, size, 1, width),
        (257, size, 1, height),
        (322, SHORT, 1, 16),
        (323, SHORT, 1, 16),
        (324, size, offsets, 300 if offsets == 1 else b"\0" * 16),
        (325, size, offsets, 256 if offsets == 1 else b"\0" * 16),
    ]


TIFFS = {
    "tiled-2p32-square-one-tile": (tiff(GRAY + _tiled(2**32 - 1, 2**32 - 1, LONG)), "needs"),
    "tiled-2p30-offsets-listed": (tiff(GRAY + _tiled(2**19, 2**23, LONG, 2**30)), "damaged"),
    "strips-2p32-rows": (
        tiff(
            [
                *GRAY,
                *[(256, LONG, 1, 16), (257, LONG, 1, 2**32 - 1), (278, LONG, 1, 1)],
                *[(273, LONG, 1, 300), (279, LONG, 1, 16)],
            ]
        ),
        "its shape needs 4,294,967,295",
    ),
    "bigtiff-2p34-square-one-tile": (
        tiff(GRAY + _tiled(2**34, 2**34, LONG8), big=True),
        "its shape needs 1,152,921,504,606,846,976",
    ),
    "bigtiff-2p52-offsets-listed": (
        tiff(GRAY + _tiled(2**34, 2**34, LONG8, 2**52), big=True),
        "damaged",
    ),
}


@pytest.mark.parametrize("name", sorted(TIFFS))
def test_tiff_tags_declaring_huge_images(tmp_path: Path, name: str) -> None:
    data, says = TIFFS[name]
    path = tmp_path / f"{name}.tif"
    path.write_bytes(data)
    with pytest.raises(refzarr.ScanError, match=rf"{name}\.tif: .*{says}"):
        bounded(lambda: refzarr.scan(path))


# -- FITS -------------------------------------------------------------------------------------


def _patched(data: bytes, changes: dict[str, object]) -> bytes:
    for key, value in changes.items():
        at = data.index(key.ljust(8).encode() + b"= ")
        data = data[:at] + card(key, value) + data[at + 80 :]
    return data


@pytest.fixture(scope="module")
def fits_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, str]]:
    from astropy.io import fits

    folder = tmp_path_factory.mktemp("fits")
    image = np.arange(64, dtype="i4").reshape(8, 8)
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(image, tile_shape=(1, 8))]).writeto(
        folder / "comp.fits"
    )
    table = fits.BinTableHDU.from_columns([fits.Column("a", format="J", array=np.arange(4))])
    fits.HDUList([fits.PrimaryHDU(), table]).writeto(folder / "table.fits")
    comp, tab = (folder / "comp.fits").read_bytes(), (folder / "table.fits").read_bytes()
    primary = [("SIMPLE", "T"), ("BITPIX", 8)]
    huge = {"ZNAXIS1": 2**31, "ZNAXIS2": 2**31}
    return {
        "primary-2p62": (
            fits_header([*primary, ("NAXIS", 2), ("NAXIS1", 2**31), ("NAXIS2", 2**31)])
            + b"\0" * 2880,
            "HDU 0",
        ),
        "primary-10p40": (
            fits_header([*primary, ("NAXIS", 1), ("NAXIS1", 10**40)]) + b"\0" * 2880,
            "HDU 0",
        ),
        "tiles-2p62": (_patched(comp, {**huge, "ZTILE1": 1, "ZTILE2": 1}), "8 tiles in its table"),
        "tiles-rows-2p40": (_patched(comp, {"NAXIS2": 2**40}), "past the end of the file"),
        "table-rows-2p40": (_patched(tab, {"NAXIS2": 2**40}), "past the end of the file"),
        "table-row-2p40-bytes": (_patched(tab, {"NAXIS1": 2**40}), "NAXIS1 says 1099511627776"),
    }


@pytest.mark.parametrize(
    "name",
    [
        "primary-2p62",
        "primary-10p40",
        "tiles-2p62",
        "tiles-rows-2p40",
        "table-rows-2p40",
        "table-row-2p40-bytes",
    ],
)
def test_fits_headers_declaring_huge_data(
    tmp_path: Path, fits_files: dict[str, tuple[bytes, str]], name: str
) -> None:
    data, says = fits_files[name]
    path = tmp_path / f"{name}.fits"
    path.write_bytes(data)
    with pytest.raises(refzarr.ScanError, match=rf"{name}\.fits: .*{says}"):
        bounded(lambda: refzarr.scan(path))


# -- GRIB -------------------------------------------------------------------------------------


def _grib2_section(message: bytes, number: int) -> int:
    at = 16
    while message[at + 4] != number:
        at += struct.unpack(">I", message[at : at + 4])[0]
    return at


@pytest.fixture(scope="module")
def grib_message() -> bytes:
    eccodes = pytest.importorskip("eccodes")
    handle = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib2")
    try:
        eccodes.codes_set(handle, "Ni", 4)
        eccodes.codes_set(handle, "Nj", 3)
        eccodes.codes_set_values(handle, np.arange(12.0))
        return bytes(eccodes.codes_get_message(handle))
    finally:
        eccodes.codes_release(handle)


@pytest.mark.parametrize("ni_nj", [(2**31 - 1, 1), (2**31, 2**31)])
def test_grib_section_3_declaring_a_huge_grid(
    tmp_path: Path, grib_message: bytes, ni_nj: tuple[int, int]
) -> None:
    """A grid whose Ni x Nj is not the message's number of points is refused while scanning
    (it cost one message: nothing allocated for the declared grid), naming both counts."""
    message = bytearray(grib_message)
    at = _grib2_section(grib_message, 3)
    message[at + 30 : at + 38] = struct.pack(">II", *ni_nj)
    path = tmp_path / "huge.grib2"
    path.write_bytes(bytes(message))
    said = rf"huge\.grib2: GRIB message 0 .* = {ni_nj[0] * ni_nj[1]} points"
    with pytest.raises(refzarr.ScanError, match=said):
        bounded(lambda: refzarr.scan(path))


# -- HDF4 -------------------------------------------------------------------------------------


def test_hdf4_sds_dimensions_patched_to_2_31(tmp_path: Path) -> None:
    """A chunked SDS of (1234, 4321) written in one chunk, its dimensions patched to
    2**31 - 1: a grid of 7.7e17 chunks, held sparse (one chunk written)."""
    pytest.importorskip("pyhdf")
    from pyhdf.SD import SDC

    sys.path.insert(0, str(Path(__file__).parents[1] / "scan" / "hdf4"))
    try:
        from h4kit import set_chunk, write_sd
    finally:
        sys.path.pop(0)
    path = tmp_path / "chunked.hdf"
    with write_sd(path) as sd:
        sds = sd.create("v", SDC.INT32, (1234, 4321))
        set_chunk(sds, (2, 3))
        sds[0:2, 0:3] = np.arange(6, dtype="i4").reshape(2, 3)
        sds.endaccess()
    data = path.read_bytes()
    for size in (1234, 4321):
        assert data.count(struct.pack(">i", size)) == 3  # SDD, dimension record, chunk table
        data = data.replace(struct.pack(">i", size), struct.pack(">i", 2**31 - 1))
    bomb = tmp_path / "bomb.hdf"
    bomb.write_bytes(data)
    group = bounded(lambda: refzarr.scan(bomb, inline_threshold=0))
    manifest = group["v"].manifest
    assert group["v"].meta.shape == (2**31 - 1, 2**31 - 1)
    assert manifest.sparse
    assert manifest.count_written() == 1
    values = bounded(lambda: refzarr.open_dataset(group)["v"][:2, :4].values)
    np.testing.assert_array_equal(values[:, :3], np.arange(6).reshape(2, 3))


# -- DMR++ ------------------------------------------------------------------------------------

_DMRPP = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Dataset xmlns="http://xml.opendap.org/ns/DAP/'
    '4.0#" xmlns:dmrpp="http://xml.opendap.org/dap/dmrpp/1.0.0#" dapVersion="4.0" '
    'dmrVersion="1.0" name="data.bin" dmrpp:href="data.bin">{}</Dataset>'
)


def _dmrpp_chunked(sizes: list[object], positions: list[int]) -> str:
    dims = "".join(f'<Dim size="{n}"/>' for n in sizes)
    chunks = "".join(
        f'<dmrpp:chunk offset="{4 * k}" nBytes="4" chunkPositionInArray="[{p}]"/>'
        for k, p in enumerate(positions)
    )
    return (
        f'<Int32 name="v">{dims}<dmrpp:chunks byteOrder="LE"><dmrpp:chunkDimensionSizes>1'
        f"</dmrpp:chunkDimensionSizes>{chunks}</dmrpp:chunks></Int32>"
    )


def _vlsa(size: int, repeat: int) -> str:
    values = f'<dmrpp:vlsa><v c="{repeat}">x</v></dmrpp:vlsa>'
    return f'<String name="v"><Dim size="{size}"/>{values}</String>'


DMRPP_ERRORS = {
    "dim-2p64": (_dmrpp_chunked([2**64], [0, 5]), refzarr.ScanError, "larger than 2\\*\\*63"),
    "dim-5000-digits": (_dmrpp_chunked(["9" * 5000], [0]), refzarr.ScanError, "5000 digits"),
    "vlsa-10p12": (_vlsa(10**12, 10**12), refzarr.UnsupportedFeatureError, "set_max_dense"),
    "vlsa-10p12-for-3": (_vlsa(3, 10**12), refzarr.ScanError, "1000000000000 values"),
}


@pytest.fixture
def data_bin(tmp_path: Path) -> Path:
    (tmp_path / "data.bin").write_bytes(np.arange(8, dtype="<i4").tobytes())
    return tmp_path / "data.bin"


@pytest.mark.parametrize("exponent", [40, 62])
def test_a_dmrpp_sidecar_declaring_a_huge_chunked_variable(data_bin: Path, exponent: int) -> None:
    sidecar = Path(f"{data_bin}.dmrpp")
    sidecar.write_text(_DMRPP.format(_dmrpp_chunked([2**exponent], [0, 2**exponent - 1])))
    group = bounded(lambda: refzarr.scan(sidecar))
    manifest = group["v"].manifest
    assert manifest.sparse
    assert manifest.count_written() == 2
    ds = refzarr.open_dataset(group, mask_and_scale=False)
    assert bounded(lambda: ds["v"][-1].values) == 1


@pytest.mark.parametrize("name", sorted(DMRPP_ERRORS))
def test_dmrpp_sidecar_bombs_are_named_errors(data_bin: Path, name: str) -> None:
    body, kind, says = DMRPP_ERRORS[name]
    sidecar = data_bin.with_name(f"{name}.dmrpp")
    sidecar.write_text(_DMRPP.format(body))
    with pytest.raises(kind, match=rf"{name}\.dmrpp: variable '/v': .*{says}"):
        bounded(lambda: refzarr.scan(sidecar))


# -- Zarr stores ------------------------------------------------------------------------------


def zarr_v2(folder: Path, shape: list[int], chunk_files: list[str]) -> Path:
    (folder / "a").mkdir(parents=True)
    (folder / ".zgroup").write_text('{"zarr_format": 2}')
    zarray = {"shape": shape, "chunks": [1] * len(shape), "dtype": "<i4", "fill_value": 0,
              "order": "C", "filters": None, "compressor": None, "zarr_format": 2}  # fmt: skip
    (folder / "a" / ".zarray").write_text(json.dumps(zarray))
    dims = {"_ARRAY_DIMENSIONS": [f"d{k}" for k in range(len(shape))]}
    (folder / "a" / ".zattrs").write_text(json.dumps(dims))
    for name in chunk_files:
        (folder / "a" / name).write_bytes(b"\x01\x00\x00\x00")
    return folder


def zarr_v3(folder: Path, shape: list[int], chunk_files: list[str]) -> Path:
    (folder / "a" / "c").mkdir(parents=True)
    (folder / "zarr.json").write_text('{"zarr_format":3,"node_type":"group","attributes":{}}')
    meta = {
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1] * len(shape)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "dimension_names": [f"d{k}" for k in range(len(shape))],
    }  # fmt: skip
    (folder / "a" / "zarr.json").write_text(json.dumps(meta))
    for name in chunk_files:
        (folder / "a" / "c" / name).write_bytes(b"\x01\x00\x00\x00")
    return folder


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("written", [0, 2, 2000])
def test_zarr_stores_declaring_2_62_chunks(tmp_path: Path, version: int, written: int) -> None:
    """Nothing, two or 2,000 chunk files in a grid of 2**62: what the listing holds."""
    last = 2**62 - 1
    numbers = [0, last] if written == 2 else [k * 1009 for k in range(written)]
    store = (zarr_v2 if version == 2 else zarr_v3)(tmp_path / "s", [2**62], list(map(str, numbers)))
    group = bounded(lambda: refzarr.scan(store, inline_threshold=0))
    manifest = group["a"].manifest
    assert manifest.sparse
    assert manifest.count_written() == written
    if written == 2:
        assert manifest[last] is not None
        ds = refzarr.open_dataset(group, mask_and_scale=False)
        assert bounded(lambda: ds["a"][-2:].values).tolist() == [0, 1]


@pytest.mark.parametrize("shape", [[2**63], [2**40, 2**40]])
@pytest.mark.parametrize("version", [2, 3])
def test_zarr_grids_past_2_62_chunks_are_refused(
    tmp_path: Path, version: int, shape: list[int]
) -> None:
    store = (zarr_v2 if version == 2 else zarr_v3)(tmp_path / "past", shape, [])
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"past: array 'a': .*2\*\*62"):
        bounded(lambda: refzarr.scan(store))


# -- HDF5 -------------------------------------------------------------------------------------


def test_hdf5_grids_past_2_62_chunks_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "past.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(2**40, 2**40), chunks=(1, 1), dtype="i1")
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"past\.h5: dataset '/x': .*2\*\*62"):
        bounded(lambda: refzarr.scan(path))


# -- the limits the scanners share --------------------------------------------------------------


def test_a_raised_dense_limit_lets_a_large_vlsa_through(data_bin: Path) -> None:
    sidecar = data_bin.with_name("many.dmrpp")
    sidecar.write_text(_DMRPP.format(_vlsa(2000, 2000)))
    sparse_module.set_max_dense_entries(1000)
    try:
        with pytest.raises(refzarr.UnsupportedFeatureError, match=r"2,000 .* limit of 1,000"):
            refzarr.scan(sidecar)
        sparse_module.set_max_dense_entries(2000)
        group = refzarr.scan(sidecar)
    finally:
        sparse_module.set_max_dense_entries(sparse_module.MAX_DENSE_ENTRIES)
    assert group["v"].meta.shape == (2000,)
