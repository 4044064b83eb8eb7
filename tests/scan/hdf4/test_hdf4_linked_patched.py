"""An SDS in linked blocks whose dimensions or blocks were patched (pyhdf-written files, bytes
changed): a named `ScanError` / `UnsupportedFeatureError`, or the data pyhdf reads; never a
reference outside the blocks, wrong data or a hang (scans in a child with a hard timeout)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from h4kit import set_blocksize, write_sd
from pyhdf.SD import SD, SDC

import refzarr
from childkit import Outcome, scan_in_child

CHILD_TIMEOUT = 120.0
ROWS, COLUMNS, BLOCK = 10, 3, 96  # float64 records: 4 rows per block, 3 blocks
DIM_VALUES, LINKED, SPECIAL_SDS = 1963, 20, 0x4000 | 702


def _write(path: Path) -> None:
    with write_sd(path) as sd:
        records = sd.create("records", SDC.FLOAT64, (SDC.UNLIMITED, COLUMNS))
        set_blocksize(records, BLOCK)
        for k in range(ROWS):
            records[k : k + 1] = np.full((1, COLUMNS), k, "f8") + np.arange(COLUMNS)
        records.endaccess()


def _descriptors(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """(tag, ref, offset, length, where the descriptor is) of every data descriptor."""
    out, at = [], 4
    while at:
        count, following = struct.unpack_from(">hi", data, at)
        for k in range(count):
            where = at + 6 + 12 * k
            out.append((*struct.unpack_from(">HHii", data, where), where))
        at = following
    return out


def _find(data: bytes, tag: int, nth: int = 0) -> tuple[int, int, int]:
    """(offset, length, descriptor position) of the ``nth`` object of ``tag`` (by ref)."""
    found = sorted((r, o, n, at) for t, r, o, n, at in _descriptors(data) if t == tag)
    _, offset, length, at = found[nth]
    return offset, length, at


def _patched(data: bytes, name: str) -> bytes:
    out = bytearray(data)
    header = _find(data, SPECIAL_SDS)[0]
    rows, columns = _find(data, DIM_VALUES, 0)[0], _find(data, DIM_VALUES, 1)[0]
    if name.startswith(("rows-", "columns-")):  # a dimension's size (DimVal0.1 vdata)
        at = rows if name.startswith("rows") else columns
        now = struct.unpack_from(">i", data, at)[0]
        struct.pack_into(">i", out, at, 2 * now if name.endswith("more") else now - 1)
    elif name == "block-length-larger":  # blocks said twice as long as they are
        struct.pack_into(">i", out, header + 6, 2 * BLOCK)
    elif name.startswith("element-"):  # the element's length: how many records it holds
        struct.pack_into(">i", out, header + 2, 5 * BLOCK if name.endswith("longer") else 144)
    else:  # "<first|middle|last>-block-<shorter|longer>": a block's descriptor length
        which, _, change = name.split("-")
        nth = {"first": 1, "middle": 2, "last": 3}[which]  # ref 1 is the link table
        at = _find(data, LINKED, nth)[2]
        struct.pack_into(">i", out, at + 8, BLOCK // 2 if change == "shorter" else 2 * BLOCK)
    return bytes(out)


PATCHES = {
    "block-length-larger": ("ScanError", "holds 96 bytes, but the element's header says"),
    "middle-block-shorter": ("ScanError", "linked block 1 (ref 3) holds 48 bytes"),
    "rows-more": None,
    "rows-fewer": None,
    "columns-more": None,
    "columns-fewer": None,
    "element-longer": ("ScanError", "says it holds 480 bytes, its linked blocks hold 288"),
    "element-shorter": None,
    "first-block-shorter": None,
    "first-block-longer": None,
    "middle-block-longer": None,
    "last-block-shorter": None,
    "last-block-longer": None,
}
"""The error (kind, text) each patch must give; None: a result equal to what pyhdf reads
(or an error where pyhdf fails too)."""


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Outcome]]:
    folder = tmp_path_factory.mktemp("linked")
    healthy = folder / "healthy.hdf"
    _write(healthy)
    cases = [{"id": "healthy", "url": str(healthy)}]
    for name in PATCHES:
        path = folder / f"{name}.hdf"
        path.write_bytes(_patched(healthy.read_bytes(), name))
        cases.append({"id": name, "url": str(path)})
    return folder, scan_in_child(cases, CHILD_TIMEOUT)


def _pyhdf(path: Path) -> np.ndarray[Any, Any] | None:
    try:
        sd = SD(str(path), SDC.READ)
    except Exception:
        return None
    try:
        return np.asarray(sd.select("records")[:])
    except Exception:
        return None
    finally:
        sd.end()


def test_the_healthy_file_is_in_linked_blocks(patched: tuple[Path, dict[str, Outcome]]) -> None:
    folder, outcomes = patched
    assert outcomes["healthy"].outcome == "result", outcomes["healthy"]
    group = refzarr.scan(str(folder / "healthy.hdf"))
    assert group["records"].meta.chunks == (4, COLUMNS)
    expected = _pyhdf(folder / "healthy.hdf")
    np.testing.assert_array_equal(refzarr.open_dataset(group)["records"].values, expected)


@pytest.mark.parametrize("name", PATCHES)
def test_a_patched_file(patched: tuple[Path, dict[str, Outcome]], name: str) -> None:
    folder, outcomes = patched
    outcome, path = outcomes[name], folder / f"{name}.hdf"
    assert outcome.outcome in ("result", "error"), outcome  # ended, no crash, no hang
    expected = PATCHES[name]
    if expected is not None:
        outcome.assert_error(expected[0], str(path), "records", expected[1])
        return
    truth = _pyhdf(path)
    if outcome.outcome == "error":
        assert "RefzarrError" in outcome.bases, outcome
        assert str(path) in outcome.message, outcome
        return
    group = refzarr.scan(str(path))
    for _, entry in _entries(group):
        if entry.url is not None:  # never a reference past the file's end
            assert entry.offset + entry.length <= path.stat().st_size
    values = refzarr.open_dataset(group)["records"].values
    assert truth is not None, f"pyhdf cannot read {name}, refzarr did: {values}"
    np.testing.assert_array_equal(values, truth)


def _entries(group: Any) -> list[tuple[int, Any]]:
    manifest = group["records"].manifest
    found = [(k, manifest[k, 0]) for k in range(manifest.grid_shape[0])]
    return [(k, entry) for k, entry in found if entry is not None and not isinstance(entry, bytes)]
