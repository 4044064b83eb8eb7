"""`refzarr.read` of a remote file reads its head first: a source file given by mistake (a large
netCDF on S3) is named after one ranged GET of `HEAD_READ` bytes, not downloaded whole; a JSON
set smaller than that costs that one GET (no HEAD), a larger one a second GET of the whole set
(from its start: one version, even when the set is replaced between the two)."""

from __future__ import annotations

import http.server
import json
from functools import partial
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

import refzarr
from corpus import ONE_PER_FORMAT
from httpkit import serving
from refzarr.formats.source import HEAD_READ
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup

S3Proxy = tuple[str, dict[str, Any], Any]


def _group(nchunks: int) -> RefGroup:
    """A group of one array whose ``nchunks`` chunks are references at random offsets (about
    60 bytes each in JSON, compressing to about 12)."""
    meta = ArrayMeta(shape=(nchunks,), chunks=(1,), dtype=np.dtype("<f4"))
    offsets = np.random.default_rng(0).integers(0, 2**40, nchunks)
    manifest = ChunkManifest.from_arrays(
        ["s3://data/a.nc"], np.zeros(nchunks, np.int32), offsets, [4] * nchunks
    )
    return RefGroup(members={"x": RefArray(meta, manifest)})


def _json_of_size(size: int) -> bytes:
    """A small reference set's JSON padded with trailing spaces to exactly ``size`` bytes."""
    text = json.dumps(refzarr.to_kerchunk(_group(3))).encode()
    assert len(text) <= size
    return text + b" " * (size - len(text))


@pytest.fixture
def put(s3: tuple[str, dict[str, Any]]) -> Any:
    """Upload bytes to the test bucket directly (not through the counting proxy)."""
    bucket, options = s3
    fs = fsspec.filesystem("s3", **options)

    def upload(key: str, data: bytes) -> str:
        fs.pipe(f"{bucket}/{key}", data)
        return f"s3://{bucket}/{key}"

    return upload


@pytest.mark.parametrize("reader", ["read", "expand_references", "open_dataset"])
def test_a_large_source_file_on_s3_is_named_after_its_head(
    put: Any, s3_proxy: S3Proxy, reader: str
) -> None:
    bucket, options, proxy = s3_proxy
    netcdf = ONE_PER_FORMAT["netcdf3"].read_bytes()
    url = put("big.nc", netcdf + bytes(4 * 2**20 - len(netcdf)))
    proxy.reset()
    with pytest.raises(refzarr.RefFormatError, match="is not a reference set but a netCDF3"):
        getattr(refzarr, reader)(url, storage_options=options)
    asked = [r for r in proxy.matching(None, f"/{bucket}/big.nc") if r.path.endswith(".nc")]
    assert [(r.method, r.range, r.sent) for r in asked] == [("GET", "bytes=0-65535", HEAD_READ)]


@pytest.mark.parametrize("reader", ["read", "expand_references", "open_dataset"])
def test_a_source_file_costs_one_request_in_all(put: Any, s3_proxy: S3Proxy, reader: str) -> None:
    """Named from its head alone: no HEAD or listing for ``big.nc/.zmetadata`` (a Parquet set
    cannot be inside a file that begins like a netCDF)."""
    bucket, options, proxy = s3_proxy
    url = put("big.nc", ONE_PER_FORMAT["netcdf3"].read_bytes())
    proxy.reset()
    with pytest.raises(refzarr.RefFormatError, match="is not a reference set but a netCDF3"):
        getattr(refzarr, reader)(url, storage_options=options)
    asked = [(r.method, r.path) for r in proxy.matching()]
    assert asked == [("GET", f"/{bucket}/big.nc")]


@pytest.mark.parametrize("reader", ["read", "expand_references"])
def test_a_small_json_set_costs_one_get(put: Any, s3_proxy: S3Proxy, reader: str) -> None:
    bucket, options, proxy = s3_proxy
    group = _group(20)
    url = put("refs.json", json.dumps(refzarr.to_kerchunk(group)).encode())
    proxy.reset()
    found = getattr(refzarr, reader)(url, storage_options=options)
    if reader == "read":
        assert found == group
    assert [r.method for r in proxy.matching(None, f"/{bucket}/")] == ["GET"]


@pytest.mark.parametrize("suffix", [".json", ".json.zst"])
def test_a_large_json_set_costs_two_gets(
    tmp_path: Any, put: Any, s3_proxy: S3Proxy, suffix: str
) -> None:
    bucket, options, proxy = s3_proxy
    group = _group(20_000)
    local = tmp_path / f"refs{suffix}"
    refzarr.write(group, local)
    data = local.read_bytes()
    assert len(data) > HEAD_READ
    url = put(f"refs{suffix}", data)
    proxy.reset()
    assert refzarr.read(url, storage_options=options) == group
    assert [r.method for r in proxy.matching(None, f"/{bucket}/")] == ["GET", "GET"]
    assert proxy.bytes_sent("GET", f"/{bucket}/") == len(data) + HEAD_READ  # head read twice


def _group_at(nchunks: int, url: str) -> RefGroup:
    """`_group` with its chunks in ``url`` (same length: the JSON differs only there)."""
    group = _group(nchunks)
    array = group["x"]
    assert isinstance(array, RefArray)
    offsets = np.random.default_rng(0).integers(0, 2**40, nchunks)
    manifest = ChunkManifest.from_arrays([url], np.zeros(nchunks, np.int32), offsets, [4] * nchunks)
    return RefGroup(members={"x": RefArray(array.meta, manifest)})


@pytest.mark.parametrize("suffix", [".json", ".json.zst"])
def test_a_set_replaced_between_the_two_gets_is_read_as_one_version(
    tmp_path: Path,
    put: Any,
    s3_proxy: S3Proxy,
    monkeypatch: pytest.MonkeyPatch,
    suffix: str,
) -> None:
    """The set is replaced (another writer's atomic write) right after the head is read: what
    is read is the new set whole (was: the old head spliced to the new rest, a set with
    chunks in both files, parsed without a word)."""
    import refzarr.formats.source as source_module

    bucket, options, proxy = s3_proxy
    old, new = _group_at(20_000, "s3://data/a.nc"), _group_at(20_000, "s3://data/b.nc")
    texts = []
    for name, group in (("old", old), ("new", new)):
        refzarr.write(group, tmp_path / f"{name}{suffix}")
        texts.append((tmp_path / f"{name}{suffix}").read_bytes())
    assert len(texts[0]) > 2 * HEAD_READ
    url = put(f"refs{suffix}", texts[0])
    real = source_module._first_bytes

    def head_then_replaced(fs: Any, path: str, size: int) -> bytes:
        head = real(fs, path, size)
        put(f"refs{suffix}", texts[1])
        return head

    monkeypatch.setattr(source_module, "_first_bytes", head_then_replaced)
    proxy.reset()
    assert refzarr.read(url, storage_options=options) == new
    assert [r.method for r in proxy.matching(None, f"/{bucket}/")] == ["GET", "GET"]


@pytest.mark.parametrize(
    "size", [HEAD_READ - 1, HEAD_READ, HEAD_READ + 1, 3 * HEAD_READ], ids=lambda n: f"{n}B"
)
def test_json_sets_around_the_head_size_read_whole(put: Any, s3: Any, size: int) -> None:
    """A set of exactly `HEAD_READ` bytes is read again whole (the rest alone would be a
    range starting at its end, which S3 refuses)."""
    url = put("refs.json", _json_of_size(size))
    assert refzarr.read(url, storage_options=s3[1]) == _group(3)


def test_an_empty_object_on_s3_is_named_not_retried(put: Any, s3_proxy: S3Proxy) -> None:
    """S3 refuses any range of an empty object (416): it is read whole, then named."""
    bucket, options, proxy = s3_proxy
    url = put("empty.json", b"")
    proxy.reset()
    with pytest.raises(refzarr.RefFormatError, match=r"empty\.json: not valid JSON"):
        refzarr.read(url, storage_options=options)
    assert proxy.count("GET", f"/{bucket}/empty.json") == 2  # the ranged one, then the whole


@pytest.mark.parametrize("size", [HEAD_READ - 1, HEAD_READ, HEAD_READ + 1, 3 * HEAD_READ])
def test_other_filesystems_read_the_whole_set(size: int) -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/head/refs.json", _json_of_size(size))
    try:
        assert refzarr.read("memory://head/refs.json") == _group(3)
    finally:
        fs.rm("/head", recursive=True)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("size", [HEAD_READ, 3 * HEAD_READ])
def test_a_server_ignoring_ranges(tmp_path: Path, size: int) -> None:
    """Python's HTTP server answers every GET with the whole file: the head is all of it, and
    the rest of a set of exactly `HEAD_READ` bytes comes whole again (not appended twice)."""
    (tmp_path / "refs.json").write_bytes(_json_of_size(size))
    with serving(partial(_Quiet, directory=str(tmp_path))) as root:
        assert refzarr.read(f"{root}/refs.json") == _group(3)


class _Ranges(_Quiet):
    """Answers a range of an empty file as servers that honour ranges do: 416."""

    def do_GET(self) -> None:
        if self.headers.get("Range") and not Path(self.translate_path(self.path)).stat().st_size:
            self.send_error(416)
            return
        super().do_GET()


def test_an_empty_file_over_http_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_bytes(b"")
    with (
        serving(partial(_Ranges, directory=str(tmp_path))) as root,
        pytest.raises(refzarr.RefFormatError, match=r"empty\.json: not valid JSON"),
    ):
        refzarr.read(f"{root}/empty.json")


def test_an_empty_file_elsewhere_is_named() -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/head/empty.json", b"")
    try:
        with pytest.raises(refzarr.RefFormatError, match=r"empty\.json: not valid JSON"):
            refzarr.read("memory://head/empty.json")
    finally:
        fs.rm("/head", recursive=True)
