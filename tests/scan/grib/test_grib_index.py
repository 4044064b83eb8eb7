"""``.idx`` sidecars (wgrib2 lines and ECMWF JSON lines): files of one layout indexed from
their sidecars alone equal their full scans; a sidecar that disagrees makes its file be
scanned; nothing is ever referenced from a guess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gribkit import blank_all_but_last_head, indexed_run, scan

from refzarr import ScanError
from refzarr.scan.grib.index import parse_index, scan_indexed
from roundtrip import assert_groups_identical


def test_parse_wgrib2_and_json_lines() -> None:
    wgrib2 = parse_index(
        "1:0:d=2025010100:SOILW:0-0.1 m below ground:anl:\n"
        "2:95343:d=2025010100:APCP:surface:0-6 hour acc fcst:\n"
    )
    assert [(e.offset, e.length, e.step) for e in wgrib2] == [(0, None, 0), (95343, None, 21600)]
    assert wgrib2[1].signature.startswith("APCP:surface:acc")
    ecmwf = parse_index(
        json.dumps({"date": "20240101", "time": "0600", "step": "3", "param": "2t",
                    "levtype": "sfc", "_offset": 10, "_length": 20}) + "\n"
    )  # fmt: skip
    assert [(e.offset, e.length, e.step, e.time) for e in ecmwf] == [(10, 20, 10800, 1704088800)]
    with pytest.raises(ValueError, match="not a wgrib2 index line"):
        parse_index("garbage\n")


def test_files_built_from_their_sidecars(tmp_path: Path) -> None:
    files = indexed_run(tmp_path, [20250101, 20250102, 20250103], [0, 6])
    full = [scan(f) for f in files]
    for path in files[1:]:  # unreadable now: only the sidecar can index them
        blank_all_but_last_head(path)
    groups = scan_indexed([str(f) for f in files])
    for got, want in zip(groups, full, strict=True):
        assert_groups_identical(got, want)


def test_disagreeing_sidecar_falls_back_to_a_scan(tmp_path: Path) -> None:
    files = indexed_run(tmp_path, [20250101, 20250102], [0, 6])
    idx = Path(f"{files[1]}.idx")
    idx.write_text(idx.read_text().replace("SOILW", "TSOIL"))
    groups = scan_indexed([str(f) for f in files])
    assert_groups_identical(groups[1], scan(files[1]))


def test_sidecar_disagreeing_with_the_first_scan_is_not_used(tmp_path: Path) -> None:
    files = indexed_run(tmp_path, [20250101, 20250102], [0, 6])
    idx = Path(f"{files[0]}.idx")
    idx.write_text(idx.read_text().replace("d=2025010100", "d=2024010100"))
    files[1].write_bytes(bytes(files[1].stat().st_size))  # must then be scanned, and fail
    with pytest.raises(ScanError, match="no GRIB message"):
        scan_indexed([str(f) for f in files])


def test_missing_sidecar_scans_the_file(tmp_path: Path) -> None:
    files = indexed_run(tmp_path, [20250101, 20250102], [0, 3])
    Path(f"{files[1]}.idx").unlink()
    groups = scan_indexed([str(f) for f in files])
    assert_groups_identical(groups[1], scan(files[1]))


def test_files_built_from_their_sidecars_drop_variables(tmp_path: Path) -> None:
    """What a scan leaves out, the sidecars' groups leave out too."""
    files = indexed_run(tmp_path, [20250101, 20250102], [0, 6])
    full = [scan(f) for f in files]
    name = next(path for path, array in full[0].arrays() if len(array.meta.shape) > 1)
    groups = scan_indexed([str(f) for f in files], drop_variables=[name])
    assert all(name not in group for group in groups)
