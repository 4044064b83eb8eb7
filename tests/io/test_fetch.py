"""RangeReader: bytes equal to the file's, in request order, over local disk, memory:// and S3;
failures are ChunkFetchError naming url, range and key, never short or padded data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refzarr import ChunkFetchError
from refzarr.io import LOCAL_POLICY, FetchPolicy, RangeReader

DATA = np.random.default_rng(0).integers(0, 256, 20_000, dtype=np.uint8).tobytes()


@pytest.fixture
def local_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    return path


ranges = st.lists(
    st.tuples(st.integers(0, len(DATA) - 1), st.integers(0, 3000)).map(
        lambda t: (t[0], min(t[1], len(DATA) - t[0]))
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None)
@given(ranges, st.integers(0, 5000), st.integers(1, 20_000))
def test_local_reads_equal_the_file(
    tmp_path_factory: pytest.TempPathFactory, reqs: list[tuple[int, int]], gap: int, block: int
) -> None:
    path = tmp_path_factory.getbasetemp() / "hyp.bin"
    if not path.exists():
        path.write_bytes(DATA)
    policy = FetchPolicy(max_gap=gap, max_block=block, concurrency=3, attempts=1)
    reader = RangeReader(local_policy=policy)
    got = reader.read([str(path)] * len(reqs), [o for o, _ in reqs], [n for _, n in reqs])
    assert [bytes(g) for g in got] == [DATA[o : o + n] for o, n in reqs]


def test_file_urls_and_paths_read_the_same(local_file: Path) -> None:
    reader = RangeReader()
    urls = [str(local_file), f"file://{local_file}", local_file.as_uri()]
    got = reader.read(urls, [5, 6, 7], [10, 10, 10])
    assert [bytes(g) for g in got] == [DATA[5:15], DATA[6:16], DATA[7:17]]


def test_memory_filesystem_and_several_files() -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/io-test/a", DATA)
    fs.pipe("/io-test/b", DATA[::-1])
    try:
        reader = RangeReader(remote_policy=FetchPolicy(max_gap=100, max_block=500, concurrency=2))
        urls = ["memory://io-test/a", "memory://io-test/b"] * 50
        offsets = list(range(0, 10_000, 100))
        got = reader.read(urls, offsets, [50] * 100)
        source = {"memory://io-test/a": DATA, "memory://io-test/b": DATA[::-1]}
        assert [bytes(g) for g in got] == [
            source[u][o : o + 50] for u, o in zip(urls, offsets, strict=True)
        ]
    finally:
        fs.rm("/io-test", recursive=True)


def test_iter_read_yields_every_request_once(local_file: Path) -> None:
    reader = RangeReader(local_policy=FetchPolicy(max_gap=0, max_block=64, concurrency=2))
    seen = dict(reader.iter_read([str(local_file)] * 30, range(0, 3000, 100), [64] * 30))
    assert sorted(seen) == list(range(30))
    assert all(bytes(seen[i]) == DATA[i * 100 : i * 100 + 64] for i in range(30))


def test_range_past_the_end_raises_naming_url_range_and_key(local_file: Path) -> None:
    reader = RangeReader()
    with pytest.raises(ChunkFetchError) as info:
        reader.read([str(local_file)], [len(DATA) - 10], [100], keys=["temp/0.1"])
    message = str(info.value)
    assert str(local_file) in message
    assert "temp/0.1" in message
    assert f"offset {len(DATA) - 10}" in message
    assert "past the end" in message


def test_missing_file_raises_without_retrying(tmp_path: Path) -> None:
    reader = RangeReader(local_policy=FetchPolicy(0, 10, 1, attempts=5, backoff=10.0))
    with pytest.raises(ChunkFetchError, match="FileNotFoundError") as info:
        reader.read([str(tmp_path / "nope.bin")], [0], [10], keys=["x/0"])
    assert "nope.bin" in str(info.value)
    assert "x/0" in str(info.value)


def test_missing_s3_object_and_range_past_end(s3: tuple[str, dict[str, Any]]) -> None:
    bucket, options = s3
    fs = fsspec.filesystem("s3", **options)
    url = f"s3://{bucket}/data.bin"
    fs.pipe(url, DATA)
    policy = FetchPolicy(max_gap=0, max_block=2**20, concurrency=4, attempts=2, backoff=0.01)
    reader = RangeReader(storage_options=options, remote_policy=policy)
    got = reader.read([url] * 3, [0, 100, 19_000], [10, 10, 1000])
    assert [bytes(g) for g in got] == [DATA[0:10], DATA[100:110], DATA[19_000:20_000]]
    with pytest.raises(ChunkFetchError, match=r"missing\.bin"):
        reader.read([f"s3://{bucket}/missing.bin"], [0], [10])
    with pytest.raises(ChunkFetchError, match=r"data\.bin"):
        reader.read([url], [19_990], [100])


def test_invalid_policy() -> None:
    with pytest.raises(ValueError, match="invalid fetch policy"):
        FetchPolicy(max_gap=-1, max_block=1, concurrency=1)


def test_many_files_read_with_few_descriptors_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read across more files than the descriptor cap: every range right, at most the cap
    open at once besides the files being read (small blocks are read in the calling thread,
    large ones by the pool)."""
    from refzarr.io import fetch

    opened: list[int] = []
    real = fetch._LocalFiles

    class Counting(real):  # type: ignore[misc, valid-type]
        def _acquire(self, path: str) -> int:
            fd = super()._acquire(path)
            opened.append(self.open_count)
            return fd

    monkeypatch.setattr(fetch, "_LocalFiles", lambda: Counting(max_open=4))
    big = DATA * 4  # larger than a small block
    paths = []
    for k in range(40):
        path = tmp_path / f"f{k}.bin"
        path.write_bytes(big[k:] + big[:k])
        paths.append(str(path))
    sizes = [10, fetch.SMALL_LOCAL_BLOCK + 1]  # both paths through `_fetch_blocks`
    urls = [p for p in paths for _ in sizes] * 2
    offsets = [k % 7 for k in range(len(urls))]
    lengths = [sizes[k % 2] for k in range(len(urls))]
    got = RangeReader().read(urls, offsets, lengths)
    for url, offset, length, data in zip(urls, offsets, lengths, got, strict=True):
        k = paths.index(url)
        assert bytes(data) == (big[k:] + big[:k])[offset : offset + length]
    assert opened
    assert max(opened) <= 4 + LOCAL_POLICY.concurrency  # the cap, plus files being read
