"""HDF5 storage layouts and links: filter masks, split contiguous data, external files, links.

Every case writes its files with h5py into tmp_path, scans them, writes kerchunk JSON and reads
the arrays back through fsspec + zarr-python 3, comparing with what h5py reads.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import h5py
import numpy as np
import pytest
import zarr
from h5kit import Writer, array, assert_matches_h5, roundtrip, write_h5
from zarr.core.sync import sync as zarr_sync
from zarr.storage import FsspecStore

import refzarr
from refzarr import ScanError, UnsupportedFeatureError
from refzarr.model import INLINED
from refzarr.scan.hdf5 import Hdf5Scanner
from refzarr.scan.hdf5.external import candidates
from roundtrip import open_zarr_group

UNLIMITED = h5py.h5f.UNLIMITED

# -- chunks that skipped filters ----------------------------------------------------------------


def _shuffled(data: np.ndarray) -> bytes:
    return data.view(np.uint8).reshape(-1, data.itemsize).T.tobytes()


def _fletcher32(data: bytes) -> bytes:
    import numcodecs

    return bytes(numcodecs.Fletcher32().encode(np.frombuffer(data, np.uint8)))


def test_chunks_that_skipped_deflate_or_every_filter(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        ds = f.create_dataset(
            "v", shape=(4, 6), chunks=(2, 3), dtype="<i4", compression="gzip", shuffle=True
        )
        ds[...] = np.arange(24).reshape(4, 6)
        # pipeline: shuffle (bit 0), deflate (bit 1)
        skipped_deflate = np.array([[-1, -2, -3], [-4, -5, -6]], dtype="<i4")
        ds.id.write_direct_chunk((0, 3), _shuffled(skipped_deflate), filter_mask=0b10)
        skipped_all = np.array([[7, 8, 9], [10, 11, 12]], dtype="<i4") * 1000
        ds.id.write_direct_chunk((2, 0), skipped_all.tobytes(), filter_mask=0b11)
        only_deflate = zlib.compress(np.full((2, 3), 99, "<i4").tobytes())
        ds.id.write_direct_chunk((2, 3), only_deflate, filter_mask=0b01)

    group = roundtrip(write_h5(tmp_path / "m.h5", writer), tmp_path)
    ids = array(group, "v").manifest.path_id
    assert ids[0, 0] >= 0
    assert ids[0, 1] == ids[1, 0] == ids[1, 1] == INLINED


def test_chunk_that_skipped_fletcher32(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        ds = f.create_dataset(
            "v", shape=(8,), chunks=(4,), dtype=">f8", compression=4, shuffle=True, fletcher32=True
        )
        ds[...] = np.linspace(0, 1, 8)
        # pipeline: shuffle (bit 0), deflate (bit 1), fletcher32 (bit 2)
        data = np.array([np.nan, -0.0, 1e300, 5], dtype=">f8")
        ds.id.write_direct_chunk((4,), zlib.compress(_shuffled(data)), filter_mask=0b100)
        checked = _fletcher32(np.array([1, 2, 3, 4], ">f8").tobytes())
        ds.id.write_direct_chunk((0,), checked, filter_mask=0b011)

    roundtrip(write_h5(tmp_path / "f.h5", writer), tmp_path)


def test_masked_chunk_read_with_inline_threshold(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        ds = f.create_dataset("partly", shape=(8,), chunks=(4,), dtype="i4", compression="gzip")
        ds[:4] = 1
        ds.id.write_direct_chunk((4,), np.arange(4, dtype="i4").tobytes(), filter_mask=1)

    roundtrip(write_h5(tmp_path / "m.h5", writer), tmp_path, inline_threshold=10)


def test_masked_chunk_with_a_bad_checksum_is_a_scan_error(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        ds = f.create_dataset(
            "v", shape=(8,), chunks=(4,), dtype="i4", fletcher32=True, compression=1
        )
        # pipeline: deflate (bit 0), fletcher32 (bit 1); deflate skipped, checksum wrong
        ds.id.write_direct_chunk((4,), b"\x00" * 16 + b"\x01\x02\x03\x04", filter_mask=0b01)

    with pytest.raises(ScanError, match=r"'/v': chunk \(1,\) \(filter mask 0x1\).*fletcher32"):
        refzarr.scan(write_h5(tmp_path / "c.h5", writer))


def test_masked_chunk_whose_filter_cannot_encode_is_unsupported(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        ds = f.create_dataset("so", shape=(8,), chunks=(4,), dtype="f4", scaleoffset=2)
        ds[:4] = 1.5
        ds.id.write_direct_chunk((4,), np.arange(4, dtype="f4").tobytes(), filter_mask=1)
        f.create_dataset("fine", data=[1, 2])

    path = write_h5(tmp_path / "s.h5", writer)
    with pytest.raises(UnsupportedFeatureError, match=r"s\.h5: dataset '/so'.*chunk \(1,\)"):
        refzarr.scan(path)
    group = roundtrip(path, tmp_path, on_unsupported="skip")
    assert [s.path for s in group.skipped] == ["/so"]
    assert "re-encoding" in group.skipped[0].reason


def test_mask_bits_past_the_pipeline_are_ignored(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        ds = f.create_dataset("v", shape=(8,), chunks=(4,), dtype="i4")
        ds.id.write_direct_chunk((0,), np.arange(4, dtype="i4").tobytes(), filter_mask=0b100)

    group = roundtrip(write_h5(tmp_path / "b.h5", writer), tmp_path)
    assert array(group, "v").manifest.path_id[0] >= 0


# -- contiguous data in several chunks ----------------------------------------------------------


def _contiguous(f: h5py.File) -> None:
    f.create_dataset("rows", data=np.arange(60.0).reshape(10, 6))
    f.create_dataset("prime", data=np.arange(13, dtype=">i8"))  # no divisor near the limit
    f.create_dataset("inner", data=np.arange(3 * 7 * 30, dtype="u1").reshape(3, 7, 30))
    f.create_dataset("wide", data=np.arange(3 * 4 * 1000, dtype="u2").reshape(3, 4, 1000))
    f.create_dataset("small", data=np.arange(3, dtype="i2"))
    f.create_dataset("scalar", data=np.float32(2.5))
    f.create_dataset("empty", shape=(0, 4), dtype="f4")
    f.create_dataset("unwritten", shape=(6, 2), dtype="i4", fillvalue=-7)
    f.create_dataset("after", data=np.full(64, 255, dtype="u1"))  # bytes past "prime" & co.


CONTIGUOUS_CHUNKS = {
    "rows": (2, 6),  # 96-byte rows pairs: 2 divides 10
    "prime": (12,),  # 13 is prime: chunks of 12, the last one padded and inlined
    "inner": (1, 3, 30),  # 7 rows of 30 bytes: 3 per chunk, straddling inside the data
    "wide": (1, 1, 50),  # rows of 2000 bytes: cut along the last axis
    "small": (3,),
    "scalar": (),
    "unwritten": (6, 2),  # never allocated: one missing chunk
}


def test_contiguous_split_whole_and_partial_reads(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", _contiguous)
    group = roundtrip(path, tmp_path, contiguous_chunk_bytes=100)
    for name, chunks in CONTIGUOUS_CHUNKS.items():
        assert array(group, name).meta.chunks == chunks, name
    prime = array(group, "prime").manifest
    assert prime.path_id.tolist() == [0, INLINED]
    root = open_zarr_group(tmp_path / "c.json")
    with h5py.File(path, "r") as f:
        for name, where in [
            ("rows", np.s_[3:7, 2:5]),
            ("prime", np.s_[9:]),
            ("prime", np.s_[4:11]),
            ("inner", np.s_[1, 5:, ::3]),
            ("inner", np.s_[2, 6]),
            ("wide", np.s_[1:, 3, 950:1000]),
            ("unwritten", np.s_[4:]),
        ]:
            got = np.asarray(root[name][where])
            assert_matches_h5(got, np.asarray(f[name][where]), name)


def test_contiguous_is_one_chunk_by_default(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "c.h5", _contiguous), tmp_path)
    assert array(group, "rows").meta.chunks == (10, 6)
    assert array(group, "rows").manifest.grid_shape == (1, 1)


def test_contiguous_split_with_inline_threshold(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", _contiguous)
    group = roundtrip(path, tmp_path, contiguous_chunk_bytes=100, inline_threshold=50)
    assert (array(group, "small").manifest.path_id == INLINED).all()  # 6 bytes
    assert (array(group, "rows").manifest.path_id == 0).all()  # 96-byte chunks


def test_contiguous_chunk_bytes_smaller_than_an_element(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "c.h5", lambda f: f.create_dataset("v", data=np.eye(3)))
    group = roundtrip(path, tmp_path, contiguous_chunk_bytes=1)
    assert array(group, "v").meta.chunks == (1, 1)


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-5, ValueError), (1.5, TypeError), (True, TypeError)]
)
def test_contiguous_chunk_bytes_is_checked(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="contiguous_chunk_bytes"):
        Hdf5Scanner(contiguous_chunk_bytes=value)  # type: ignore[arg-type]


# -- external raw data files --------------------------------------------------------------------


def _external(f: h5py.File) -> None:
    data = np.arange(12, dtype="<i4").reshape(4, 3)
    f.create_dataset("one", data=data, external=[("one.raw", 16, UNLIMITED)])
    f.create_dataset("two", data=data * 2, external=[("a.raw", 0, 24), ("b.raw", 8, UNLIMITED)])
    # three segments of the same file, 1 + 3 rows: chunks of one row
    f.create_dataset(
        "three", data=data * 3, external=[("c.raw", 0, 12), ("c.raw", 100, 24), ("c.raw", 7, 12)]
    )
    f.create_dataset("kept", data=[1, 2, 3])


def test_external_raw_data_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # h5py writes and reads external files by the current directory
    group = roundtrip(write_h5(tmp_path / "e.h5", _external), tmp_path)
    one, two, three = array(group, "one"), array(group, "two"), array(group, "three")
    assert one.meta.chunks == (4, 3)
    assert one.manifest[0, 0] == (str(tmp_path / "one.raw"), 16, 48)
    assert two.meta.chunks == (2, 3)
    assert two.manifest[1, 0] == (str(tmp_path / "b.raw"), 8, 24)
    assert three.meta.chunks == (1, 3)
    assert [three.manifest[i, 0][1] for i in range(4)] == [0, 100, 112, 7]  # type: ignore[index]


def test_external_files_split_by_contiguous_chunk_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    group = roundtrip(write_h5(tmp_path / "e.h5", _external), tmp_path, contiguous_chunk_bytes=12)
    assert array(group, "one").meta.chunks == (1, 3)
    assert array(group, "two").meta.chunks == (1, 3)


def test_external_files_inlined_below_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    group = roundtrip(write_h5(tmp_path / "e.h5", _external), tmp_path, inline_threshold=100)
    for name in ("one", "two", "three"):
        assert (array(group, name).manifest.path_id == INLINED).all(), name


def test_external_files_are_found_next_to_the_hdf5_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    monkeypatch.chdir(data_dir)
    write_h5(data_dir / "e.h5", _external)
    with h5py.File(data_dir / "e.h5") as f:
        expected = {name: f[name][()] for name in ("one", "two", "three")}
    monkeypatch.chdir(tmp_path)  # HDF5 itself would now look in tmp_path
    refzarr.write(refzarr.scan(data_dir / "e.h5"), tmp_path / "e.json")
    root = open_zarr_group(tmp_path / "e.json")
    for name, values in expected.items():
        assert_matches_h5(np.asarray(root[name][...]), values, name)


def test_external_segments_off_row_boundaries_are_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    def writer(f: h5py.File) -> None:
        data = np.arange(12, dtype="<i4").reshape(4, 3)
        f.create_dataset("odd", data=data, external=[("a.raw", 0, 20), ("b.raw", 0, UNLIMITED)])
        f.create_dataset("kept", data=[1])

    path = write_h5(tmp_path / "o.h5", writer)
    with pytest.raises(UnsupportedFeatureError, match=r"'/odd'.*\[20\] bytes.*rows of 12 bytes"):
        refzarr.scan(path)
    group = roundtrip(path, tmp_path, on_unsupported="skip")
    assert [s.path for s in group.skipped] == ["/odd"]


def test_missing_or_short_external_file_is_unsupported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write_h5(tmp_path / "e.h5", _external)
    (tmp_path / "a.raw").unlink()
    with (tmp_path / "one.raw").open("r+b") as raw:
        raw.truncate(40)
    with pytest.raises(UnsupportedFeatureError, match=r"'/one'.*one\.raw.* has 40 bytes.*64"):
        refzarr.scan(path)
    group = refzarr.scan(path, on_unsupported="skip")
    reasons = {s.path: s.reason for s in group.skipped}  # type: ignore[attr-defined]
    assert sorted(reasons) == ["/one", "/two"]
    assert "'a.raw' not found; looked at" in reasons["/two"]


def test_external_files_and_links_of_a_remote_file(
    s3: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket, options = s3
    monkeypatch.chdir(tmp_path)
    path = write_h5(tmp_path / "e.h5", _external)
    write_h5(tmp_path / "linking.h5", lambda f: f.__setitem__("e", h5py.ExternalLink("e.h5", "/")))
    remote = fsspec.filesystem("s3", **options)
    for name in ("e.h5", "linking.h5", "one.raw", "a.raw", "b.raw", "c.raw"):
        remote.put_file(str(tmp_path / name), f"s3://{bucket}/sub/{name}")
    group = refzarr.scan(f"s3://{bucket}/sub/linking.h5", storage_options=options)
    assert array(group, "e/two").manifest[0, 0] == (f"s3://{bucket}/sub/a.raw", 0, 24)
    refzarr.write(group, tmp_path / "remote.json")
    with _s3_store(tmp_path / "remote.json", options, "e") as store, h5py.File(path) as f:
        root = zarr.open_group(store, mode="r", zarr_format=2)
        for name in ("one", "two", "three", "kept"):
            assert_matches_h5(np.asarray(root[name][...]), f[name][()], name)


@contextlib.contextmanager
def _s3_store(refs: Path, options: dict[str, Any], group: str) -> Iterator[FsspecStore]:
    """zarr's store over references to data on S3; the asynchronous s3fs session closed after."""
    store = FsspecStore.from_url(
        f"reference://{group}",
        storage_options={
            "fo": str(refs),
            "remote_protocol": "s3",
            "remote_options": {**options, "asynchronous": True},
            "skip_instance_cache": True,
        },
        read_only=True,
    )
    try:
        yield store
    finally:
        for remote in {id(fs): fs for fs in store.fs.fss.values()}.values():
            if getattr(remote, "_s3", None) is not None:

                async def close(remote: Any = remote) -> None:
                    client = await remote.set_session()
                    await client.close()

                zarr_sync(close())


@pytest.mark.parametrize(
    ("base", "name", "local", "expected"),
    [
        ("s3://b/dir/f.h5", "x.raw", False, ["s3://b/dir/x.raw"]),
        ("s3://b/dir/f.h5", "../up/x.raw", False, ["s3://b/up/x.raw"]),
        ("s3://b/dir/f.h5", "/abs/x.raw", False, []),
        ("/data/dir/f.h5", "/abs/x.raw", True, ["/abs/x.raw"]),
        ("/data/dir/f.h5", "sub/../x.raw", True, ["/data/dir/x.raw", os.path.abspath("x.raw")]),
    ],
)
def test_where_named_files_are_looked_for(
    base: str, name: str, local: bool, expected: list[str]
) -> None:
    assert candidates(base, name, local) == expected


# -- external links -----------------------------------------------------------------------------


def _target(f: h5py.File) -> None:
    f.create_dataset("v", data=np.arange(6.0).reshape(2, 3), chunks=(1, 3), compression="gzip")
    grp = f.create_group("g")
    grp.attrs["title"] = "linked"
    grp.create_dataset("w", data=np.arange(4, dtype="i2"))
    layout = h5py.VirtualLayout(shape=(6,), dtype="i2")
    layout[1:5] = h5py.VirtualSource(grp["w"])  # off the chunk grid: unsupported
    grp.create_virtual_dataset("bad", layout)


def test_external_links_reference_the_target_file(tmp_path: Path) -> None:
    target = write_h5(tmp_path / "target.h5", _target)

    def writer(f: h5py.File) -> None:
        f["ext"] = h5py.ExternalLink("target.h5", "/v")
        f.create_group("sub")["linked"] = h5py.ExternalLink("target.h5", "/g")
        f.create_dataset("kept", data=[3, 4])

    group = roundtrip(write_h5(tmp_path / "e.h5", writer), tmp_path, on_unsupported="skip")
    assert array(group, "ext").manifest[0, 0][0] == str(target)  # type: ignore[index]
    assert array(group, "sub/linked/w").manifest[0][0] == str(target)  # type: ignore[index]
    assert dict(group["sub/linked"].attributes) == {"title": "linked"}
    assert [s.path for s in group.skipped] == ["/sub/linked/bad"]


def test_missing_external_link_target_is_unsupported(tmp_path: Path) -> None:
    write_h5(tmp_path / "target.h5", _target)

    def writer(f: h5py.File) -> None:
        f["no_file"] = h5py.ExternalLink("nowhere.h5", "/v")
        f["no_object"] = h5py.ExternalLink("target.h5", "/nothing")
        f.create_dataset("kept", data=[3, 4])

    path = write_h5(tmp_path / "e.h5", writer)
    with pytest.raises(UnsupportedFeatureError, match=r"'/no_file'.*'nowhere\.h5'.*not found"):
        refzarr.scan(path)
    group = roundtrip(path, tmp_path, on_unsupported="skip")
    reasons = {s.path: s.reason for s in group.skipped}
    assert sorted(reasons) == ["/no_file", "/no_object"]
    assert "'/nothing' not found in" in reasons["/no_object"]
    assert list(group.members) == ["kept"]


def test_external_link_cycles_are_unsupported(tmp_path: Path) -> None:
    def first(f: h5py.File) -> None:
        f.create_dataset("x", data=[1, 2])
        f.create_group("g")["to_b"] = h5py.ExternalLink("b.h5", "/")
        f["self"] = h5py.ExternalLink("a.h5", "/")

    def second(f: h5py.File) -> None:
        f.create_dataset("y", data=[3.0])
        f["back"] = h5py.ExternalLink("a.h5", "/g")
        f["x_of_a"] = h5py.ExternalLink("a.h5", "/x")  # not a cycle: a dataset

    path = write_h5(tmp_path / "a.h5", first)
    write_h5(tmp_path / "b.h5", second)
    with pytest.raises(
        UnsupportedFeatureError, match=r"b\.h5: link '/back'.*'/g' in 'a\.h5'.*cycle"
    ):
        refzarr.scan(path)
    group = refzarr.scan(path, on_unsupported="skip")
    assert sorted(s.path for s in group.skipped) == ["/g/to_b/back", "/self"]  # type: ignore[attr-defined]
    assert array(group, "g/to_b/x_of_a").manifest[0][0] == str(path)  # type: ignore[index]
    assert array(group, "g/to_b/y").shape == (1,)


# -- virtual datasets -------------------------------------------------------------------------


def _sources(tmp_path: Path, count: int = 3, **kwargs: object) -> list[Path]:
    paths = []
    for k in range(count):
        data = np.arange(24, dtype="<f4").reshape(4, 6) + 100 * k

        def writer(f: h5py.File, data: np.ndarray = data) -> None:
            f.create_dataset("img", data=data, **kwargs)  # type: ignore[arg-type]

        paths.append(write_h5(tmp_path / f"src{k}.h5", writer))
    return paths


def _stack(paths: list[Path], shape: tuple[int, ...] = (3, 4, 6)) -> Writer:
    def writer(f: h5py.File) -> None:
        layout = h5py.VirtualLayout(shape=shape, dtype="<f4")
        for k, path in enumerate(paths):
            layout[k] = h5py.VirtualSource(path.name, "img", shape=(4, 6))
        f.create_virtual_dataset("stack", layout)

    return writer


@pytest.mark.parametrize(
    ("kwargs", "chunks"),
    [({"chunks": (2, 3), "compression": "gzip"}, (1, 2, 3)), ({}, (1, 4, 6))],
    ids=["chunked", "contiguous"],
)
def test_virtual_dataset_stacking_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, object], chunks: tuple
) -> None:
    monkeypatch.chdir(tmp_path)
    paths = _sources(tmp_path, **kwargs)
    group = roundtrip(write_h5(tmp_path / "v.h5", _stack(paths, (4, 4, 6))), tmp_path)
    stack = array(group, "stack")
    assert stack.meta.chunks == chunks
    assert set(stack.manifest.paths) == {str(p) for p in paths}
    assert (stack.manifest.path_id[3] == -1).all()  # the fourth layer is mapped to nothing
    assert [c["id"] for c in stack.meta.codecs] == (["zlib"] if kwargs else [])


def test_virtual_dataset_in_one_file(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        f.create_dataset("src", data=np.arange(8), chunks=(2,), fillvalue=-1)
        layout = h5py.VirtualLayout(shape=(3, 8), dtype="i8")
        layout[1] = h5py.VirtualSource(f["src"])
        layout[2, 4:8] = h5py.VirtualSource(f["src"])[0:4]
        f.create_virtual_dataset("vds", layout, fillvalue=-1)

    group = roundtrip(write_h5(tmp_path / "v.h5", writer), tmp_path)
    assert array(group, "vds").manifest[2, 3] == array(group, "src").manifest[1]


def _misfits(f: h5py.File) -> None:
    f.create_dataset("a", data=np.arange(8, dtype="i4"), chunks=(2,))
    f.create_dataset("b", data=np.arange(8, dtype="i4"), chunks=(2,), compression="gzip")
    f.create_dataset("c", data=np.arange(8, dtype="i4"), chunks=(4,))
    cases = {
        "shifted": [(np.s_[1:9], "a", np.s_[0:8])],
        "source_off_chunk": [(np.s_[0:4], "a", np.s_[1:5])],
        "codecs": [(np.s_[0:8], "a", np.s_[0:8]), (np.s_[8:16], "b", np.s_[0:8])],
        "chunks": [(np.s_[0:8], "a", np.s_[0:8]), (np.s_[8:16], "c", np.s_[0:8])],
        "strided": [(np.s_[0:8:2], "a", np.s_[0:4])],
    }
    for name, mappings in cases.items():
        layout = h5py.VirtualLayout(shape=(16,), dtype="i4")
        for where, source, part in mappings:
            layout[where] = h5py.VirtualSource(f[source])[part]
        f.create_virtual_dataset(name, layout)
    layout = h5py.VirtualLayout(shape=(8,), dtype="i4")
    layout[:] = h5py.VirtualSource("gone.h5", "x", shape=(8,))
    f.create_virtual_dataset("missing_file", layout)


def test_virtual_datasets_that_do_not_fit_one_grid_are_unsupported(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "v.h5", _misfits)
    with pytest.raises(UnsupportedFeatureError, match=r"v\.h5: dataset '/chunks'.*chunk shape"):
        refzarr.scan(path)
    group = roundtrip(path, tmp_path, on_unsupported="skip")
    reasons = {s.path: s.reason for s in group.skipped}
    assert sorted(reasons) == [
        "/chunks",
        "/codecs",
        "/missing_file",
        "/shifted",
        "/source_off_chunk",
        "/strided",
    ]
    assert "not fall on whole chunks of 2" in reasons["/shifted"]
    assert "not on a chunk boundary" in reasons["/source_off_chunk"]
    assert "codecs" in reasons["/codecs"]
    assert "not one box" in reasons["/strided"]
    assert "'gone.h5' not found" in reasons["/missing_file"]
