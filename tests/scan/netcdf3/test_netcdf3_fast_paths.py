"""What the netCDF3 scanner builds without the model's checks (`ArrayMeta.trusted`,
`ChunkManifest.in_one_file`, the one-pass header parser) equals what the checked
constructors build from the same values, on every corpus file and on files of every type."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from nc3kit import FORMATS, write_nc

import refzarr
from corpus import corpus_files
from refzarr.model import ArrayMeta, ChunkManifest, RefArray
from refzarr.model.frozen import freeze_json, thaw_json
from refzarr.scan.netcdf3.header import _Parser, parse_header

TYPES = ("i1", "S1", "i2", "i4", "f4", "f8", "u1", "u2", "u4", "i8", "u8")


def _every_type(path: Path, fmt: str) -> Path:
    def write(ds: object) -> None:
        ds.title = "every type"  # type: ignore[attr-defined]
        ds.createDimension("time", None)  # type: ignore[attr-defined]
        ds.createDimension("x", 3)  # type: ignore[attr-defined]
        for code in TYPES if fmt == "NETCDF3_64BIT_DATA" else TYPES[:6]:
            var = ds.createVariable(f"v_{code}", code, ("time", "x"))  # type: ignore[attr-defined]
            if code != "S1":
                var.valid_range = np.array([0, 9], dtype=code)
                var.scale_factor = np.array(2, dtype=code)
            var[:] = np.zeros((2, 3), dtype=code)
        ds.createVariable("x", "f4", ("x",))[:] = [1, 2, 3]  # type: ignore[attr-defined]
        ds.createVariable("big", "f8", ("x",))[:] = [1, 2, 3]  # type: ignore[attr-defined]

    return write_nc(path, write, fmt)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("fast")
    made = [_every_type(folder / f"{fmt}.nc", fmt) for fmt in FORMATS]
    return [*corpus_files("netcdf3"), *made]


def _checked(arr: RefArray) -> RefArray:
    meta = arr.meta
    checked = ArrayMeta(
        shape=list(meta.shape),
        chunks=list(meta.chunks),
        dtype=meta.dtype.str,
        fill_value=meta.fill_value,
        attributes=thaw_json(meta.attributes),
        dimension_names=list(meta.dimension_names or ()),
    )
    m = arr.manifest
    manifest = ChunkManifest.from_arrays(
        list(m.paths),
        m.path_id.reshape(m.grid_shape),
        m.offset.reshape(m.grid_shape),
        m.length.reshape(m.grid_shape),
        m.inlined,
    )
    return RefArray(checked, manifest)


@pytest.mark.parametrize("inline_coordinates", [0, 65536])
def test_scanned_arrays_equal_checked_ones(files: list[Path], inline_coordinates: int) -> None:
    for path in files:
        group = refzarr.scan(path, inline_coordinates=inline_coordinates)
        assert group.attributes == freeze_json(thaw_json(group.attributes))
        for name, arr in group.arrays():
            checked = _checked(arr)
            assert arr == checked, f"{path.name}: {name}"
            for field in ArrayMeta.__dataclass_fields__:
                mine, theirs = getattr(arr.meta, field), getattr(checked.meta, field)
                assert type(mine) is type(theirs), f"{path.name}: {name}.{field}"
            for column in ("path_id", "offset", "length"):
                values = getattr(arr.manifest, column)
                assert not values.flags.writeable, f"{path.name}: {name}.{column}"
                assert values.dtype == getattr(checked.manifest, column).dtype
        assert pickle.loads(pickle.dumps(group)) == group


def test_the_quick_parser_gives_what_the_careful_one_gives(files: list[Path]) -> None:
    for path in files:
        data = path.read_bytes()
        careful = _Parser(data, len(data), str(path), data[3]).header()
        assert repr(parse_header(data, len(data), str(path))) == repr(careful), path.name  # NaN


def test_in_one_file_refuses_what_it_cannot_hold() -> None:
    offsets = np.zeros(2, dtype=np.uint64)
    with pytest.raises(refzarr.RefFormatError):
        ChunkManifest.in_one_file("f.nc", offsets.astype(np.int64), 4)  # type: ignore[arg-type]
    with pytest.raises(refzarr.RefFormatError):
        ChunkManifest.in_one_file("f.nc", offsets, 0)
    manifest = ChunkManifest.in_one_file("f.nc", offsets.reshape(2, 1), 4)
    assert manifest == ChunkManifest.from_arrays(
        ["f.nc"], np.zeros((2, 1), np.int32), offsets.reshape(2, 1), np.full((2, 1), 4)
    )
