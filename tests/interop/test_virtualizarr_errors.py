"""What cannot cross between refzarr and VirtualiZarr is a named error (issue 18 part 4)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import refzarr
from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup

pytest.importorskip("virtualizarr")

from refzarr.interop.virtualizarr import (
    RefzarrParser,
    from_virtual_dataset,
    to_virtual_dataset,
)
from refzarr.model.grid import RectilinearAxis


def _referenced(meta: ArrayMeta) -> RefArray:
    grid = meta.grid_shape
    n = int(np.prod(grid))
    manifest = ChunkManifest.from_arrays(
        ["/data/file.bin"],
        np.zeros(grid, dtype=np.int32),
        np.arange(n, dtype=np.uint64).reshape(grid) * 100,
        np.full(grid, 100, dtype=np.uint64),
    )
    return RefArray(meta, manifest)


def test_import_refzarr_does_not_import_virtualizarr() -> None:
    code = (
        "import sys, refzarr; refzarr.to_virtual_dataset; "
        "assert 'virtualizarr' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_virtualizarr_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "virtualizarr.manifests", None)
    with pytest.raises(refzarr.MissingDependencyError, match=r"refzarr\[virtualizarr\]"):
        refzarr.to_virtual_dataset(RefGroup())
    with pytest.raises(refzarr.MissingDependencyError, match=r"refzarr\[virtualizarr\]"):
        RefzarrParser()("file:///nowhere.nc", None)


def test_irregular_chunk_grid_is_named() -> None:
    meta = ArrayMeta(
        shape=(5,),
        chunks=(3,),
        dtype=np.dtype("f4"),
        dimension_names=("t",),
        rectilinear=(RectilinearAxis((3, 2), (3, 2)),),
    )
    group = RefGroup(members={"v": _referenced(meta)})
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"'v'.*regular chunk grid"):
        to_virtual_dataset(group)


def test_fortran_order_is_named() -> None:
    meta = ArrayMeta(
        shape=(4, 4), chunks=(2, 2), dtype=np.dtype("<i4"), order="F", dimension_names=("a", "b")
    )
    group = RefGroup(members={"f": _referenced(meta)})
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"'f'.*Fortran order"):
        to_virtual_dataset(group)


def test_relative_paths_are_named() -> None:
    meta = ArrayMeta(shape=(4,), chunks=(4,), dtype=np.dtype("<i4"), dimension_names=("a",))
    manifest = ChunkManifest.from_arrays(["relative/file.bin"], [0], [0], [16])
    group = RefGroup(members={"r": RefArray(meta, manifest)})
    with pytest.raises(refzarr.RefFormatError, match=r"'r'.*absolute"):
        to_virtual_dataset(group)


def test_object_variable_is_named() -> None:
    vds = xr.Dataset({"names": ("n", np.array(["a", "bb"], dtype=object))})
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"'names'.*fixed-width"):
        from_virtual_dataset(vds)


def test_sharded_array_is_named() -> None:
    from virtualizarr.manifests import ChunkManifest as VzManifest
    from virtualizarr.manifests import ManifestArray
    from zarr.core.dtype import parse_data_type
    from zarr.core.metadata.v3 import ArrayV3Metadata

    metadata = ArrayV3Metadata(
        shape=(4,),
        data_type=parse_data_type(np.dtype("int32"), zarr_format=3),
        chunk_grid={"name": "regular", "configuration": {"chunk_shape": (4,)}},
        chunk_key_encoding={"name": "default"},
        fill_value=0,
        codecs=[
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": (2,),
                    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                },
            }
        ],
        attributes={},
        dimension_names=("a",),
        storage_transformers=None,
    )
    manifest = VzManifest({"0": {"path": "/data/x.bin", "offset": 0, "length": 40}})
    marr = ManifestArray(metadata=metadata, chunkmanifest=manifest)
    vds = xr.Dataset({"s": marr.to_virtual_variable()})
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"'s'.*ShardingCodec"):
        from_virtual_dataset(vds)


def test_whole_file_references_get_the_file_size(tmp_path: Path) -> None:
    """A reference to a whole file (kerchunk's ``[url]``) gets the file's size as length."""
    data = tmp_path / "chunk.bin"
    data.write_bytes(np.arange(4, dtype="<i4").tobytes())
    group = refzarr.from_kerchunk(
        {
            "version": 1,
            "refs": {
                ".zgroup": '{"zarr_format":2}',
                "a/.zarray": '{"shape":[4],"chunks":[4],"dtype":"<i4","fill_value":null,'
                '"order":"C","filters":null,"compressor":null,"zarr_format":2}',
                "a/.zattrs": '{"_ARRAY_DIMENSIONS":["a"]}',
                "a/0": [str(data)],
            },
        }
    )
    vds = to_virtual_dataset(group, round_trip=False)
    entry = vds["a"].data.manifest.dict()["0"]
    assert (entry["offset"], entry["length"]) == (0, 16)
    back = from_virtual_dataset(vds)
    values = refzarr.open_dataset(back)["a"].values
    np.testing.assert_array_equal(values, np.arange(4, dtype="<i4"))


def test_a_chunk_of_zero_bytes_is_named() -> None:
    """VirtualiZarr 2.8 refuses a reference of length 0 with a plain ValueError; no reader
    decodes one anyway: named on every VirtualiZarr version, before VirtualiZarr sees it."""
    meta = ArrayMeta(shape=(8,), chunks=(4,), dtype=np.dtype("<i4"), dimension_names=("x",))
    manifest = ChunkManifest.from_arrays(["/data/file.bin"], [0, 0], [0, 16], [16, 0])
    group = RefGroup(members={"v": RefArray(meta, manifest)})
    with pytest.raises(refzarr.UnsupportedFeatureError) as raised:
        to_virtual_dataset(group)
    assert str(raised.value).startswith(
        "array 'v': chunk (1,) is 0 bytes long (/data/file.bin at byte 16; 1 such chunk(s))"
    )
    assert "VirtualiZarr refuses it" in str(raised.value)
