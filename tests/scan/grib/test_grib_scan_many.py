"""``refzarr.scan_many(urls, grib_index="auto")``: files whose sidecar agrees with a scanned file
of their layout are built from it (local and on S3, two small requests per file, no message
read); a sidecar that disagrees, or none, means a full scan; results equal full scans."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import fsspec
import pytest
from gribkit import blank_all_but_last_head, indexed_run, scan

import refzarr
import refzarr.sources.state as source_state
from corpus import CORPUS
from refzarr.codecs.grib_eccodes import load_eccodes
from roundtrip import assert_groups_identical

DATES = [20250101, 20250102, 20250103]


def _assert_equal_scans(got: Any, files: list[Path], **options: Any) -> None:
    assert len(got) == len(files)
    for group, path in zip(got, files, strict=True):
        assert_groups_identical(group, scan(path, **options))


@pytest.mark.parametrize(("ecmwf", "executor"), [(False, "serial"), (True, None)],
                         ids=["wgrib2-serial", "ecmwf-default"])  # fmt: skip
def test_files_built_from_sidecars(tmp_path: Path, ecmwf: bool, executor: str | None) -> None:
    files = indexed_run(tmp_path, DATES, [0, 6, 12], ecmwf=ecmwf)
    full = [scan(f) for f in files]
    for path in files[1:]:  # only the sidecar (and the last message's head) can index them
        blank_all_but_last_head(path)
    results = refzarr.scan_many(files, grib_index="auto", executor=executor, progress=False)
    assert results.urls == tuple(str(f) for f in files)
    assert results.indexed == tuple(str(f) for f in files[1:])  # the first one scanned
    for got, want in zip(results, full, strict=True):
        assert_groups_identical(got, want)
    combined = refzarr.combine(results, concat_dims="time")
    array = combined["soilw/instant/depthBelowLandLayer/soilw"]
    assert array.shape[:2] == (3, 3)  # type: ignore[union-attr]


def test_files_built_from_sidecars_record_their_sources(tmp_path: Path) -> None:
    """Built files carry the record a scan gives them (the GRIB file, not its sidecar), so
    that `check_sources` and `refresh` see them rewritten."""
    files = indexed_run(tmp_path, DATES, [0, 6, 12])
    results = refzarr.scan_many(files, grib_index="auto", executor="serial", progress=False)
    for group, path in zip(results, files, strict=True):
        (recorded,) = group.sources["scans"]
        assert recorded["url"] == str(path.resolve())
        assert list(recorded["files"]) == [str(path.resolve())]
        assert recorded["files"][str(path.resolve())]["size"] == path.stat().st_size
    target = tmp_path / "refs.json"
    refzarr.write(refzarr.combine(results, concat_dims="time"), target)
    assert refzarr.check_sources(target) == []
    (tmp_path / "twin").mkdir()
    twin = indexed_run(tmp_path / "twin", [DATES[2]], [0, 6, 12], perturbationNumber=4)
    files[2].write_bytes(twin[0].read_bytes())  # same layout, another member's values
    stat = files[2].stat()
    os.utime(files[2], ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    (change,) = refzarr.check_sources(target)
    assert change.url == str(files[2].resolve())
    assert refzarr.refresh(target) == [change]
    assert refzarr.check_sources(target) == []


def _era5_twin(path: Path, shift: int, count: int = 24) -> Path:
    """The first ``count`` messages of the corpus's ERA5 GRIB1 file, ``shift`` added to their
    dates, with an ECMWF JSON-lines sidecar at ``<path>.idx``."""
    eccodes = load_eccodes()
    parts, lines, offset = [], [], 0
    with open(CORPUS / "grib" / "era5-2mt-2019-03-uk.grib", "rb") as f:
        for _ in range(count):
            handle = eccodes.codes_grib_new_from_file(f)
            try:
                date = eccodes.codes_get(handle, "dataDate") + shift
                eccodes.codes_set(handle, "dataDate", date)
                hhmm = eccodes.codes_get(handle, "dataTime")
                part = bytes(eccodes.codes_get_message(handle))
                length = eccodes.codes_get(handle, "totalLength")
            finally:
                eccodes.codes_release(handle)
            entry = {"date": str(date), "time": f"{hhmm:04d}", "step": "0", "param": "2t",
                     "levtype": "sfc", "_offset": offset, "_length": length}  # fmt: skip
            lines.append(json.dumps(entry))
            parts.append(part)
            offset += len(part)
    path.write_bytes(b"".join(parts))
    Path(f"{path}.idx").write_text("\n".join(lines) + "\n")
    return path


def test_grib1_files_built_from_sidecars(tmp_path: Path) -> None:
    files = [_era5_twin(tmp_path / f"era5-{k}.grib", 10000 * k) for k in range(3)]
    full = [scan(f) for f in files]
    for path in files[1:]:
        data = bytearray(path.read_bytes())
        last = json.loads(Path(f"{path}.idx").read_text().splitlines()[-1])["_offset"]
        data[:last] = bytes(last)
        data[last + 200 :] = bytes(len(data) - last - 200)  # PDS and GDS: 8 + 28 + 32 bytes
        path.write_bytes(bytes(data))
    results = refzarr.scan_many(files, grib_index="auto", executor="serial", progress=False)
    for got, want in zip(results, full, strict=True):
        assert_groups_identical(got, want)


def test_each_layout_learnt_from_its_first_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    runs = [indexed_run(tmp_path / "a", DATES, [0, 6]), indexed_run(tmp_path / "b", DATES, [3])]
    files = [path for pair in zip(*runs, strict=True) for path in pair]  # a, b, a, b, ...
    full = [scan(f) for f in files]
    for path in files[2:]:
        blank_all_but_last_head(path)
    results = refzarr.scan_many(files, grib_index="auto", executor="serial", progress=False)
    for got, want in zip(results, full, strict=True):
        assert_groups_identical(got, want)


def _spoil(files: list[Path], how: str) -> None:
    """Make the second file's sidecar disagree with it (or with its layout), or remove it."""
    idx = Path(f"{files[1]}.idx")
    lines = idx.read_text().splitlines()
    if how == "missing":
        idx.unlink()
    elif how == "variable":  # another layout: learnt by scanning the file
        idx.write_text(idx.read_text().replace("SOILW", "TSOIL"))
    elif how == "last-offset":
        parts = lines[-1].split(":")
        parts[1] = str(int(parts[1]) + 1)
        idx.write_text("\n".join([*lines[:-1], ":".join(parts)]) + "\n")
    elif how == "first-offset":
        idx.write_text("\n".join([lines[0].replace(":0:", ":1:", 1), *lines[1:]]) + "\n")
    elif how == "step":
        idx.write_text(idx.read_text().replace("12 hour fcst", "15 hour fcst"))
    elif how == "date":
        idx.write_text(idx.read_text().replace("d=2025010200", "d=2025010300"))
    elif how == "member":  # same sidecar lines, another ensemble member in the file
        member = indexed_run(files[1].parent / "m", [DATES[1]], [0, 6, 12], perturbationNumber=3)
        files[1].write_bytes(member[0].read_bytes())
    elif how == "garbage":
        idx.write_text("not a sidecar\n")


@pytest.mark.parametrize(
    "how",
    ["missing", "variable", "last-offset", "first-offset", "step", "date", "member", "garbage"],
)
def test_disagreeing_or_missing_sidecar_means_a_full_scan(tmp_path: Path, how: str) -> None:
    (tmp_path / "m").mkdir()
    files = indexed_run(tmp_path, DATES[:2], [0, 6, 12])
    _spoil(files, how)
    results = refzarr.scan_many(files, grib_index="auto", executor="serial", progress=False)
    _assert_equal_scans(results, files)
    assert results.indexed == ()  # scanned whole: the second file's sidecar did not serve
    if how == "member":  # the file's own member, not the first file's
        group = "soilw/instant/depthBelowLandLayer"
        with refzarr.open_dataset(results[1], group=group) as ds:
            assert int(ds["number"]) == 3


def test_sidecars_left_out_when_the_first_file_disagrees(tmp_path: Path) -> None:
    files = indexed_run(tmp_path, DATES, [0, 6])
    idx = Path(f"{files[0]}.idx")
    idx.write_text(idx.read_text().replace("6 hour fcst", "9 hour fcst"))
    for path in files[1:]:  # every file must then be scanned, so these fail, named
        blank_all_but_last_head(path)
    results = refzarr.scan_many(
        files, grib_index="auto", executor="serial", on_error="skip", progress=False
    )
    assert results.urls == (str(files[0]),)
    assert [e.url for e in results.errors] == [str(f) for f in files[1:]]


def test_inline_threshold_is_honoured(tmp_path: Path) -> None:
    files = indexed_run(tmp_path, DATES[:2], [0, 6])
    options: dict[str, Any] = {"inline_threshold": 1 << 20}
    results = refzarr.scan_many(
        files, grib_index="auto", executor="serial", progress=False, **options
    )
    _assert_equal_scans(results, files, **options)


def test_option_is_checked(tmp_path: Path) -> None:
    files = indexed_run(tmp_path, DATES[:1], [0])
    with pytest.raises(ValueError, match="grib_index must be 'auto' or None"):
        refzarr.scan_many(files, grib_index="always", progress=False)
    assert refzarr.scan(files[0], grib_index="auto") == scan(files[0])
    with pytest.raises(TypeError, match="grib_index"):
        refzarr.scan_many(files, format="hdf5", grib_index="auto", progress=False)


def test_cli_grib_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from refzarr.cli import main

    files = indexed_run(tmp_path, DATES, [0, 6])
    full = refzarr.combine([scan(f) for f in files], concat_dims="time")
    for path in files[1:]:
        blank_all_but_last_head(path)
    out = tmp_path / "run.json"
    argv = ["scan", *map(str, files), "--grib-index", "auto", "--concat-dim", "time", "-o"]
    assert main([*argv, str(out)]) == 0
    said = capsys.readouterr().out
    assert said == f"{out}: 3 files along time, 2 from .idx sidecars, 1 scanned whole\n"
    assert_groups_identical(refzarr.read(out), full)


def test_s3_two_small_requests_per_file(
    s3: tuple[str, dict[str, Any]],
    s3_proxy: tuple[str, dict[str, Any], Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two small GETs per built file, and its state for the record of sources: one HEAD
    per file in a folder of few files, one listing for a folder of many."""
    _, direct = s3
    bucket, options, proxy = s3_proxy
    files = indexed_run(tmp_path, DATES, [0, 6, 12])
    fs = fsspec.filesystem("s3", **direct)
    for path in files:
        fs.put(str(path), f"{bucket}/{path.name}")
        fs.put(f"{path}.idx", f"{bucket}/{path.name}.idx")
    urls = [f"s3://{bucket}/{path.name}" for path in files]
    proxy.reset()
    results = refzarr.scan_many(
        urls, grib_index="auto", storage_options=options, executor="serial", progress=False
    )
    for got, url in zip(results, urls, strict=True):
        assert_groups_identical(got, refzarr.scan(url, format="grib", storage_options=direct))
    last = int(Path(f"{files[1]}.idx").read_text().splitlines()[-1].split(":")[1])
    for path in files[1:]:
        key = f"/{bucket}/{path.name}"
        seen = [(r.method, r.path, r.range) for r in proxy.matching(path=key)]
        head = f"bytes={last}-{last + 32767}"  # sections 0 to 4 of the last message
        assert seen == [("HEAD", key, None), ("GET", f"{key}.idx", "bytes=0-"), ("GET", key, head)]
        assert proxy.bytes_sent(path=key) <= path.stat().st_size - last + 1000
    for got, url in zip(results, urls, strict=True):
        (recorded,) = got.sources["scans"]
        (scanned,) = refzarr.scan(url, format="grib", storage_options=direct).sources["scans"]
        assert recorded["files"] == scanned["files"]
        assert (recorded["url"], recorded["format"]) == (url, "grib")
        assert dict(recorded["options"]) == {"grib_index": "auto"}
    monkeypatch.setattr(source_state, "LISTING_MIN", 2)  # "a folder of many files"
    proxy.reset()
    again = refzarr.scan_many(
        urls, grib_index="auto", storage_options=options, executor="serial", progress=False
    )
    assert [g.sources for g in again] == [g.sources for g in results]
    assert proxy.count("HEAD") == 0
    assert len([r for r in proxy.matching("GET") if "list-type" in r.query]) == 1
