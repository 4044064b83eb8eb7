"""HDF4 test kit: pyhdf's reading of a file (the truth), refzarr's and zarr's reading through
the references, and writers of small HDF4 files (pyhdf, plus the HDF4 C library pyhdf ships
for what pyhdf does not wrap: chunking, N-bit, linked-block sizes, GR images)."""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyhdf
import zarr
from pyhdf.error import HDF4Error
from pyhdf.SD import SD, SDC
from zarr.storage import FsspecStore

import refzarr
import refzarr.codecs.hdf4  # zarr decodes our codecs in this process
from roundtrip import reference_options

__all__ = [
    "SdsTruth",
    "all_readers",
    "assert_matches_pyhdf",
    "hdf4_lib",
    "norm",
    "pyhdf_truth",
    "refzarr_reader",
    "set_blocksize",
    "set_chunk",
    "set_nbit",
    "write_eos_grid",
    "write_sd",
    "zarr_reader",
]


def hdf4_lib(name: str = "libmfhdf") -> ctypes.CDLL:
    """A library of the HDF4 C library pyhdf's wheel bundles: ``libmfhdf`` (the SD
    interface) or ``libdf`` (the rest: GR, Vdata; the one libmfhdf links, so ids are shared)."""
    folder = Path(pyhdf.__file__).parent.parent / "pyhdf.libs"
    found = glob.glob(str(folder / f"{name}-*.so*"))
    assert found, f"pyhdf's bundled {name} is not in {folder}"
    return ctypes.CDLL(found[0])


class _ChunkDef(ctypes.Structure):
    _fields_ = [("words", ctypes.c_int32 * 64)]


HDF_CHUNK, HDF_COMP, HDF_NBIT = 1, 3, 5


def set_chunk(sds: Any, chunks: tuple[int, ...], coder: int = 0, param: int = 0) -> None:
    """``SDsetchunk``: chunk an SDS, compressed with HDF4 coder ``coder`` (deflate level or
    skipping size in ``param``)."""
    definition = _ChunkDef()
    for k, n in enumerate(chunks):
        definition.words[k] = n
    flags = HDF_CHUNK
    if coder:
        definition.words[32] = coder
        definition.words[34] = param
        flags = HDF_COMP
    status = hdf4_lib().SDsetchunk(ctypes.c_int32(sds._id), definition, ctypes.c_int32(flags))
    assert status == 0, "SDsetchunk failed"


def set_nbit(sds: Any, start_bit: int, bit_len: int, sign_ext: bool, fill_one: bool) -> None:
    """``SDsetnbitdataset``: store only ``bit_len`` bits ending at ``start_bit``."""
    status = hdf4_lib().SDsetnbitdataset(sds._id, start_bit, bit_len, int(sign_ext), int(fill_one))
    assert status != -1, "SDsetnbitdataset failed"  # it returns an access id on success


def set_blocksize(sds: Any, size: int) -> None:
    """``SDsetblocksize``: the linked-block size of an SDS's appended records."""
    assert hdf4_lib().SDsetblocksize(sds._id, size) == 0, "SDsetblocksize failed"


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    """The working directory set to ``folder`` (HDF4 names external files relative to it)."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def write_sd(path: Path) -> Iterator[SD]:
    """An SD interface open for writing ``path`` (closed, and the file complete, on exit);
    external files it creates go next to it."""
    with inside(path.parent):
        sd = SD(os.fspath(path), SDC.WRITE | SDC.CREATE | SDC.TRUNC)
        try:
            yield sd
        finally:
            sd.end()


def write_eos_grid(
    path: Path,
    projection: str,
    params: str,
    shape: tuple[int, int] = (3, 4),
    corners: tuple[str, str] = ("(-40000.0,30000.0)", "(40000.0,-30000.0)"),
    extra: str = "",
    name: str = "G",
) -> Path:
    """A small HDF-EOS2-like file: one grid ``name`` of ``shape`` (rows, columns) in
    ``StructMetadata.0`` (``Projection=projection``, ``params``: the lines that follow it, such
    as ``ProjParams=(...)`` and ``SphereCode=...``; ``extra``: more header lines, such as
    ``GridOrigin=...``), and one int16 field ``band`` on ``(YDim:<name>, XDim:<name>)``."""
    lines = [
        f'GridName="{name}"',
        f"XDim={shape[1]}",
        f"YDim={shape[0]}",
        f"UpperLeftPointMtrs={corners[0]}",
        f"LowerRightMtrs={corners[1]}",
        f"Projection={projection}",
        *params.split("\n"),
        *(extra.split("\n") if extra else ["GridOrigin=HDFE_GD_UL"]),
    ]
    text = "\n".join(
        [
            "GROUP=SwathStructure",
            "END_GROUP=SwathStructure",
            "GROUP=GridStructure",
            "\tGROUP=GRID_1",
            *(f"\t\t{line.strip()}" for line in lines if line.strip()),
            "\t\tGROUP=Dimension",
            "\t\tEND_GROUP=Dimension",
            "\t\tGROUP=DataField",
            "\t\t\tOBJECT=DataField_1",
            '\t\t\t\tDataFieldName="band"',
            "\t\t\t\tDataType=DFNT_INT16",
            '\t\t\t\tDimList=("YDim","XDim")',
            "\t\t\tEND_OBJECT=DataField_1",
            "\t\tEND_GROUP=DataField",
            "\tEND_GROUP=GRID_1",
            "END_GROUP=GridStructure",
            "GROUP=PointStructure",
            "END_GROUP=PointStructure",
            "END",
            "",
        ]
    )
    with write_sd(path) as sd:
        sd.attr("StructMetadata.0").set(SDC.CHAR8, text)
        sds = sd.create("band", SDC.INT16, shape)
        sds.dim(0).setname(f"YDim:{name}")
        sds.dim(1).setname(f"XDim:{name}")
        sds[:] = np.arange(shape[0] * shape[1], dtype=np.int16).reshape(shape)
        sds.attr("long_name").set(SDC.CHAR8, "a field")
        sds.endaccess()
    return path


@dataclass(frozen=True)
class SdsTruth:
    """What pyhdf reads of one SDS."""

    values: np.ndarray | None
    shape: tuple[int, ...]
    dims: list[str]
    attributes: dict[str, Any]
    scales: dict[str, np.ndarray]


def norm(value: Any) -> Any:
    """A pyhdf attribute value as refzarr keeps it: lists for arrays, text without its NUL
    padding (HDF-EOS pads ``StructMetadata.0`` to 32,000 bytes with NULs)."""
    if isinstance(value, np.ndarray | tuple | list):
        return [norm(v) for v in value]
    if isinstance(value, str):
        return value.rstrip("\0")
    return value


def pyhdf_truth(path: Path) -> tuple[dict[str, Any], dict[str, SdsTruth]]:
    """File attributes and every SDS (not dimension scales) as pyhdf reads them."""
    sd = SD(os.fspath(path))
    try:
        found = {}
        for name in sd.datasets():
            sds = sd.select(name)
            _, _, dims, _, _ = sds.info()
            shape = tuple(dims) if isinstance(dims, list) else (dims,)
            try:
                values = sds.get() if 0 not in shape else None
            except ValueError:  # pyhdf's library has no szip decoder
                values = None
            scales = {}
            for k, dim_name in enumerate(sds.dimensions()):
                with contextlib.suppress(HDF4Error):  # no scale set
                    # pyhdf gives the scale of a dimension of length 1 as a number
                    scales[dim_name] = np.asarray(sds.dim(k).getscale()).reshape(-1)
            found[name] = SdsTruth(values, shape, list(sds.dimensions()), sds.attributes(), scales)
            sds.endaccess()
        return {k: norm(v) for k, v in sd.attributes().items()}, found
    finally:
        sd.end()


def zarr_reader(refs: Any) -> Callable[[str], np.ndarray]:
    """Reads arrays of a reference set (a dict, JSON or Parquet path) with zarr-python 3
    through fsspec's ReferenceFileSystem (opened once)."""
    options = reference_options(refs)
    store = FsspecStore.from_url("reference://", storage_options=options, read_only=True)
    return lambda name: np.asarray(zarr.open_array(store, path=name, mode="r", zarr_format=2)[...])


def refzarr_reader(group: refzarr.RefGroup) -> Callable[[str], np.ndarray]:
    """Reads arrays of a scanned group with refzarr's own reader (its zarr Store)."""
    store = refzarr.ReferenceStore(group)
    return lambda name: np.asarray(zarr.open_array(store, path=name, mode="r", zarr_format=2)[...])


def all_readers(group: refzarr.RefGroup, folder: Path) -> dict[str, Callable[[str], np.ndarray]]:
    """refzarr's reader on ``group``, and zarr through fsspec on the JSON and Parquet
    reference sets refzarr writes of it into ``folder``."""
    json_path, parquet_path = folder / "refs.json", folder / "refs.parq"
    refzarr.write(group, json_path)
    refzarr.write(group, parquet_path)
    return {
        "refzarr": refzarr_reader(group),
        "zarr+json": zarr_reader(json_path),
        "zarr+parquet": zarr_reader(parquet_path),
    }


def assert_equal_values(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    """Same shape, same values (NaN equal to NaN); dtypes equal up to byte order (pyhdf
    hands out native values)."""
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if expected.dtype.kind == "S" or got.dtype.kind == "S":
        assert got.astype("S1").tobytes() == np.asarray(expected).astype("S1").tobytes(), what
        return
    assert got.dtype.newbyteorder("=") == expected.dtype.newbyteorder("="), (
        f"{what}: dtype {got.dtype} != {expected.dtype}"
    )
    nan = expected.dtype.kind == "f"
    if not np.array_equal(got, expected, equal_nan=nan):  # the fast check; details if not
        np.testing.assert_array_equal(got, expected, strict=False, err_msg=what)


def _without_grid_mapping(
    group: refzarr.RefGroup, attributes: Any, truth: dict[str, Any]
) -> dict[str, Any]:
    """An SDS's attributes without the ``grid_mapping`` / ``coordinates`` refzarr adds on an
    HDF-EOS2 grid it gives a CRS (checked to name a ``spatial_ref`` array of the group)."""
    got = {k: norm(v) for k, v in attributes.items()}
    mapping = got.get("grid_mapping")
    if mapping is None or "grid_mapping" in truth:
        return got
    assert mapping.startswith("spatial_ref"), mapping
    assert mapping in group, mapping
    assert got.pop("coordinates") == mapping
    del got["grid_mapping"]
    return got


def assert_matches_pyhdf(
    path: Path,
    group: refzarr.RefGroup,
    readers: dict[str, Callable[[str], np.ndarray]],
    substitutes: dict[str, str] | None = None,
) -> int:
    """Every SDS of ``path`` reads back through each reader exactly as pyhdf reads it, with
    pyhdf's dimension names and attributes; dimension scales as coordinate arrays. Returns
    the number of arrays compared. ``substitutes`` maps an SDS pyhdf cannot decode to one
    holding the same values."""
    with inside(path.parent):
        attributes, truths = pyhdf_truth(path)
    assert {k: norm(v) for k, v in group.attributes.items()} == attributes
    compared = 0
    for name, truth in truths.items():
        key = name.replace("/", "_")
        array = group[key]
        assert isinstance(array, refzarr.RefArray)
        assert list(array.meta.dimension_names or ()) == truth.dims, name
        assert array.shape == truth.shape, name
        got = _without_grid_mapping(group, array.meta.attributes, truth.attributes)
        assert got == {k: norm(v) for k, v in truth.attributes.items()}, name
        values = truth.values
        if values is None and substitutes and name in substitutes:
            values = truths[substitutes[name]].values
        if values is None:
            assert 0 in truth.shape, f"{name}: pyhdf read nothing to compare with"
            values = np.zeros(truth.shape, dtype=array.meta.dtype)
        for reader_name, read in readers.items():
            assert_equal_values(read(key), values, f"{name} through {reader_name}")
            compared += 1
        for dim, scale in truth.scales.items():
            coordinate = group[dim.replace("/", "_")]
            assert isinstance(coordinate, refzarr.RefArray), dim
            expected = scale.astype(coordinate.meta.dtype)  # pyhdf gives a list of Python numbers
            for reader_name, read in readers.items():
                got = read(dim.replace("/", "_"))
                assert_equal_values(got, expected, f"scale {dim} {reader_name}")
    return compared
