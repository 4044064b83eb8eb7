"""`refresh` writes a reference set again in the form it had: JSON its Version and
compression, Parquet its record size."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
import xarray as xr
import zstandard

import refzarr
from refzarr.sources.refresh import json_version, written_form
from sourceskit import write_day


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    return [write_day(folder / f"day{k}.nc", k, chunks=(1, 4), units=None) for k in range(2)]


def _refresh_after_rewrite(days: list[Path], target: Path) -> None:
    write_day(days[1], 1, scale=3.0, chunks=(1, 4), units=None)
    stat = os.stat(days[1])
    os.utime(days[1], ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert len(refzarr.refresh(target)) == 1
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        got = refzarr.open_dataset(refzarr.read(target))
        xr.testing.assert_equal(got.load(), expected.load())


def _document(raw: bytes) -> Any:
    if raw.startswith(b"\x28\xb5\x2f\xfd"):
        raw = zstandard.ZstdDecompressor().stream_reader(raw).read()
    elif raw.startswith(b"\x1f\x8b"):
        raw = gzip.decompress(raw)
    return json.loads(raw)


@pytest.mark.parametrize(
    ("name", "version", "compression"),
    [
        ("refs.json", 1, None),
        ("refs.json.zst", 1, "zstd"),
        ("refs.json", 0, "gzip"),  # compressed without the suffix saying so: kept
        ("refs.json.gz", 0, "gzip"),
    ],
)
def test_json_keeps_its_version_and_compression(
    tmp_path: Path, days: list[Path], name: str, version: int, compression: Any
) -> None:
    target = tmp_path / name
    group = refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")
    refzarr.write(group, target, version=version, compression=compression)
    expected = {"format": "json", "version": version, "compression": compression}
    assert written_form(target) == expected
    _refresh_after_rewrite(days, target)
    raw = target.read_bytes()
    assert written_form(target)["compression"] == compression
    assert ("version" in _document(raw)) == (version == 1)


def test_parquet_keeps_its_record_size(tmp_path: Path, days: list[Path]) -> None:
    target = tmp_path / "refs.parq"
    group = refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")
    refzarr.write(group, target, record_size=3)
    _refresh_after_rewrite(days, target)
    assert json.loads((target / ".zmetadata").read_text())["record_size"] == 3
    assert written_form(target) == {"format": "parquet", "record_size": 3}


@pytest.mark.parametrize(
    ("head", "version"),
    [
        (b'{"version":1,"refs":{}}', 1),
        (b' \n{ "refs": {"a/0": ["x"]}, "version": 1}', 1),
        (b'{"templates": {"u": "s3://b"}, "version": 1, "refs": {}}', 1),
        (b'{".zgroup": "{\\"version\\": 1}"}', 0),
        (b'{"version/.zarray": "{}"}', 0),
        (b'{"' + b"k" * 5000, 0),  # a key longer than the head
        (b"", 0),
        (b"[1]", 0),
    ],
)
def test_json_version_from_the_first_key(head: bytes, version: int) -> None:
    assert json_version(head) == version
