"""RangeReader: bytes equal to the file's, in request order, over local disk, memory:// and S3;
failures are ChunkFetchError naming url, range and key, never short or padded data."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
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


def test_missing_s3_credentials_are_not_retried(s3: tuple[str, dict[str, Any]]) -> None:
    """No credentials anywhere (the fixture empties the environment): botocore's
    NoCredentialsError fails the read at once, not after every retry."""
    bucket, options = s3
    url = f"s3://{bucket}/data.bin"
    fsspec.filesystem("s3", **options).pipe(url, DATA)
    anonymous = {k: v for k, v in options.items() if k not in ("key", "secret", "token")}
    policy = FetchPolicy(max_gap=0, max_block=2**20, concurrency=1, attempts=4, backoff=30.0)
    reader = RangeReader(storage_options=anonymous, remote_policy=policy)
    with pytest.raises(ChunkFetchError, match=r"NoCredentialsError.*\(not retried\)"):
        reader.read([url], [0], [10], keys=["x/0"])


def test_invalid_policy() -> None:
    with pytest.raises(ValueError, match="invalid fetch policy"):
        FetchPolicy(max_gap=-1, max_block=1, concurrency=1)


def test_many_files_read_with_few_descriptors_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read across more files than the descriptor cap: every range right, at most the cap
    open at once besides the files being read (small blocks are read in the calling thread,
    large ones by the pool)."""
    from refzarr.io import fetch, local_files

    opened: list[int] = []
    real = local_files.LocalFiles

    class Counting(real):  # type: ignore[misc, valid-type]
        def _acquire(self, path: str) -> int:
            fd = super()._acquire(path)
            opened.append(self.open_count)
            return fd

    monkeypatch.setattr(fetch, "LocalFiles", lambda: Counting(max_open=4))
    big = DATA * 4  # larger than a small block
    paths = []
    for k in range(40):
        path = tmp_path / f"f{k}.bin"
        path.write_bytes(big[k:] + big[:k])
        paths.append(str(path))
    sizes = [10, local_files.SMALL_LOCAL_BLOCK + 1]  # both paths through `_fetch_blocks`
    urls = [p for p in paths for _ in sizes] * 2
    offsets = [k % 7 for k in range(len(urls))]
    lengths = [sizes[k % 2] for k in range(len(urls))]
    got = RangeReader().read(urls, offsets, lengths)
    for url, offset, length, data in zip(urls, offsets, lengths, got, strict=True):
        k = paths.index(url)
        assert bytes(data) == (big[k:] + big[:k])[offset : offset + length]
    assert opened
    assert max(opened) <= 4 + LOCAL_POLICY.concurrency  # the cap, plus files being read


@pytest.fixture
def pools_made(monkeypatch: pytest.MonkeyPatch) -> list[ThreadPoolExecutor]:
    """Every thread pool a read's workers make from now on (the shared ones start afresh)."""
    from refzarr.io import workers

    made: list[ThreadPoolExecutor] = []

    class Counted(ThreadPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(workers, "ThreadPoolExecutor", Counted)
    monkeypatch.setattr(workers, "_SHARED_POOLS", {})
    return made


def _big_file(tmp_path: Path, blocks: int) -> tuple[Path, bytes, int]:
    """A file of ``blocks`` large ranges apart more than a merge gap (each read by a thread)."""
    from refzarr.io.local_files import SMALL_LOCAL_BLOCK

    size = SMALL_LOCAL_BLOCK * 2
    stride = size + LOCAL_POLICY.max_gap + 1
    data = (DATA * (stride * blocks // len(DATA) + 1))[: stride * blocks]
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    return path, data, stride


def test_local_reads_make_no_pool_per_call(
    tmp_path: Path, pools_made: list[ThreadPoolExecutor]
) -> None:
    """One range (as zarr asks through a store: one chunk at a time) is read in the calling
    thread; several large ranges by one pool shared across reads and readers."""
    path, data, stride = _big_file(tmp_path, 6)
    size = stride - LOCAL_POLICY.max_gap - 1
    for k in range(20):
        (got,) = RangeReader().read([str(path)], [k * 7], [size])
        assert bytes(got) == data[k * 7 : k * 7 + size]
    assert pools_made == []
    offsets = [k * stride for k in range(6)]
    for reader in (RangeReader(), RangeReader(), RangeReader()):
        for _ in range(3):
            got = reader.read([str(path)] * 6, offsets, [size] * 6)
            assert [bytes(g) for g in got] == [data[o : o + size] for o in offsets]
    assert len(pools_made) == 1
    assert len(pools_made[0]._threads) <= LOCAL_POLICY.concurrency


def test_stopping_early_waits_for_its_blocks_in_flight(
    tmp_path: Path, pools_made: list[ThreadPoolExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read stopped after its first block cancels the blocks not started and waits for those
    in flight in the shared pool before closing their descriptors (none read after closing,
    none left open)."""
    path, data, stride = _big_file(tmp_path, 12)
    size = stride - LOCAL_POLICY.max_gap - 1
    in_flight = [0]
    real = RangeReader._fetch_block

    def counted(self: RangeReader, *args: Any) -> bytes:
        in_flight[0] += 1
        try:
            if threading.current_thread() is not threading.main_thread():
                time.sleep(0.05)  # still in flight when the reader stops
            return real(self, *args)
        finally:
            in_flight[0] -= 1

    monkeypatch.setattr(RangeReader, "_fetch_block", counted)
    opened = set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    offsets = [k * stride for k in range(12)]
    blocks = RangeReader().iter_blocks([str(path)] * 12, offsets, [size] * 12)
    first = next(blocks)
    blocks.close()
    assert in_flight == [0]
    assert bytes(first.data) == data[int(first.requests[0]) * stride :][:size]
    assert len(pools_made) == 1
    if opened is not None:
        assert set(os.listdir("/proc/self/fd")) <= opened


def test_a_forked_child_reads_with_its_own_pool(tmp_path: Path) -> None:
    """The shared pool's threads do not exist in a forked child: it makes its own."""
    path, data, stride = _big_file(tmp_path, 4)
    size = stride - LOCAL_POLICY.max_gap - 1
    offsets = [k * stride for k in range(4)]
    reader = RangeReader()
    reader.read([str(path)] * 4, offsets, [size] * 4)  # the parent's pool has threads now
    context = multiprocessing.get_context("fork")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12)
        with context.Pool(1) as pool:
            result = pool.apply_async(_read_digest, (reader, str(path), offsets, size))
            got = result.get(timeout=60)
    assert got == [hash(data[o : o + size]) for o in offsets]
    assert pickle.loads(pickle.dumps(reader)).read([str(path)], [0], [5])[0] == data[:5]


def _read_digest(reader: RangeReader, path: str, offsets: list[int], size: int) -> list[int]:
    return [hash(bytes(b)) for b in reader.read([path] * len(offsets), offsets, [size] * 4)]
