"""Conformance of the HDF5 scanner over the real-file corpus: every dataset h5py reads is read
back identical through the written references (JSON and Parquet, fsspec + zarr-python 3), or
is an `UnsupportedFeatureError` naming it; nothing is wrong and nothing is dropped in silence.

The test does not know which features are supported: as codecs and datatypes are added, datasets
move from "unsupported" to "identical", and the assertions stay the same.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin  # noqa: F401  (registers the Blosc, Zstandard, LZ4, bitshuffle... filters)
import numpy as np
import pytest
import zarr
from fsspec.implementations.reference import ReferenceFileSystem
from h5kit import CORPUS, CORPUS_FILES, assert_matches_h5

import refzarr
from refzarr import ReferenceStore, UnsupportedFeatureError
from refzarr.io import RangeReader
from refzarr.reader import ArrayReader
from refzarr.scan import ScannedGroup
from refzarr.scan.hdf5.dims import is_dimension_only, variable_name
from roundtrip import open_zarr_group, reference_fs

ZARR_READ_LIMIT = 1000
"""Arrays of more chunks are read through zarr from JSON only (see `_compare`)."""

# fsspec reads Parquet reference sets with fastparquet by default (pyarrow under pandas 3 reads
# a missing chunk's null path as NaN: see tests/formats/test_parquet.py)
FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")


@dataclass
class Report:
    """What became of every dataset of one file."""

    file: str
    h5py_reads: int = 0
    json_identical: int = 0
    parquet_identical: int = 0
    refzarr_identical: int = 0
    store_identical: int = 0
    dimension_only: int = 0
    h5py_cannot_read: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    HEADER = (
        f"{'file':<44} {'h5py':>5} {'json':>5} {'parq':>5} {'ours':>5} {'store':>5} "
        f"{'dims':>5} {'unsup':>5} {'wrong':>5} {'drop':>5} {'h5err':>5}"
    )

    def row(self) -> str:
        return (
            f"{self.file[:44]:<44} {self.h5py_reads:>5} {self.json_identical:>5} "
            f"{self.parquet_identical:>5} {self.refzarr_identical:>5} "
            f"{self.store_identical:>5} {self.dimension_only:>5} {len(self.unsupported):>5} "
            f"{len(self.wrong):>5} {len(self.dropped):>5} {len(self.h5py_cannot_read):>5}"
        )


def h5py_datasets(f: h5py.File) -> Iterator[tuple[str, str, h5py.Dataset]]:
    """(path in the file, path of the variable in the result, dataset) for every link to a
    dataset, hard or soft, group by group (a link back to an ancestor group is not followed).

    The variable path is the link's, except that netCDF's ``_nc4_non_coord_x`` is ``x``.
    """

    def walk(group: h5py.Group, ancestors: frozenset[Any]) -> Iterator[tuple[str, str, Any]]:
        inside = ancestors | {group.id}
        prefix = group.name.rstrip("/")
        for name in group:
            try:
                item = group.get(name)
            except (KeyError, OSError):  # a broken external link: h5py lists no dataset
                continue
            if isinstance(item, h5py.Dataset):
                yield f"{prefix}/{name}", f"{prefix}/{variable_name(name, group)}", item
            elif isinstance(item, h5py.Group) and item.id not in inside:
                yield from walk(item, inside)

    yield from walk(f, frozenset())


def _open(refs: Path) -> zarr.Group | Exception:
    """The reference set's root group, or why zarr cannot open it (every array is then wrong)."""
    try:
        return open_zarr_group(refs)
    except Exception as exc:  # e.g. a codec id numcodecs does not know
        return exc


def _read(root: zarr.Group | Exception, path: str) -> np.ndarray:
    if isinstance(root, Exception):
        raise root
    array = root[path.lstrip("/")]
    assert isinstance(array, zarr.Array), path
    return np.asarray(array[...])


def _h5py_values(ds: h5py.Dataset) -> np.ndarray:
    """What h5py reads; variable-length strings as an object array of str, references as the
    text refzarr gives them (see `refzarr.scan.hdf5.vlen`)."""
    string = h5py.check_string_dtype(ds.dtype)
    if string is not None and string.length is None:
        return np.asarray(ds.asstr(errors="surrogateescape")[()], dtype=object)
    values = np.asarray(ds[()])
    kind = h5py.check_ref_dtype(ds.dtype)
    if kind is None:
        return values
    text = _object_text if kind is h5py.Reference else _region_text
    out = np.empty(values.shape, dtype=object)
    for index in np.ndindex(values.shape):
        ref = values[index]
        out[index] = text(ds, ref) if ref else ""
    return out


def _object_text(ds: h5py.Dataset, ref: Any) -> str:
    name = ds.file[ref].name
    assert isinstance(name, str)
    return name


def _region_text(ds: h5py.Dataset, ref: Any) -> str:
    """``<target path> {<selection>}`` in h5dump's notation."""
    space = h5py.h5r.get_region(ref, ds.id)
    kind = space.get_select_type()
    if kind == h5py.h5s.SEL_HYPERSLABS:
        blocks = space.get_select_hyper_blocklist().tolist()
        selection = ", ".join(f"{_point(a)}-{_point(b)}" for a, b in blocks)
    elif kind == h5py.h5s.SEL_POINTS:
        selection = ", ".join(_point(p) for p in space.get_select_elem_pointlist().tolist())
    else:
        selection = "ALL" if kind == h5py.h5s.SEL_ALL else ""
    return f"{_object_text(ds, ref)} {{{selection}}}"


def _point(coords: list[int]) -> str:
    return "(" + ",".join(str(c) for c in coords) + ")"


def _assert_same(got: np.ndarray, expected: np.ndarray, path: str) -> None:
    """Identical to h5py's values; variable-length strings (and references as text), which
    h5py gives as Python objects and zarr-python 3 as numpy's StringDType (or objects for
    ``vlen-bytes``), must be the same strings."""
    if expected.dtype.kind == "O":
        kind = "TUO" if got.ndim == 0 else "TO"  # zarr gives a 0-d array back as a str
        assert got.dtype.kind in kind, f"{path}: dtype {got.dtype} for variable-length strings"
        assert got.shape == expected.shape, path
        assert _as_bytes(got) == _as_bytes(expected), path
        return
    assert_matches_h5(got, expected, path)


def _as_bytes(values: np.ndarray) -> list[bytes]:
    """Strings (or bytes, from ``vlen-bytes``) as bytes, undecodable ones restored."""
    items = values.astype(object).ravel().tolist()
    return [v if isinstance(v, bytes) else v.encode("utf-8", "surrogateescape") for v in items]


@dataclass
class _Sources:
    """The two written reference sets of one file, opened with zarr and with fsspec."""

    json: zarr.Group | Exception
    parquet: zarr.Group | Exception
    json_fs: ReferenceFileSystem
    parquet_fs: ReferenceFileSystem
    grid_size: dict[str, int]
    ours: refzarr.RefGroup  # the Parquet set read back by refzarr, for refzarr's own reader
    store: zarr.Group | Exception  # the same through refzarr.ReferenceStore + zarr


def _open_sources(group: ScannedGroup, json_path: Path, parquet_path: Path) -> _Sources:
    refzarr.write(group, json_path)
    refzarr.write(group, parquet_path)
    sizes = {f"/{name}": int(np.prod(a.manifest.grid_shape)) for name, a in group.arrays()}
    ours = refzarr.read(parquet_path)
    return _Sources(
        _open(json_path),
        _open(parquet_path),
        reference_fs(json_path),
        reference_fs(parquet_path),
        sizes,
        ours,
        _open_store(ours),
    )


def _open_store(group: refzarr.RefGroup) -> zarr.Group | Exception:
    try:
        return zarr.open_group(ReferenceStore(group), mode="r", zarr_format=2)
    except Exception as exc:
        return exc


def _read_ours(group: refzarr.RefGroup, path: str) -> np.ndarray:
    """An array read by refzarr's own reader (one batched fetch, parallel decode)."""
    array = group[path.lstrip("/")]
    assert isinstance(array, refzarr.RefArray), path
    return ArrayReader(array, path, RangeReader())[...]


def _compare(sources: _Sources, var_path: str, expected: np.ndarray, report: Report) -> None:
    """Read one array through JSON and through Parquet; count it identical or wrong.

    An array of more than `ZARR_READ_LIMIT` chunks (zarr-python spends ~0.3 ms a chunk) is read
    through zarr from JSON only, a leading block of at most that many chunks (the whole array
    is read by refzarr's reader); through Parquet its metadata and every chunk must then be
    byte-identical to JSON's, which decode to the same values.
    """
    if sources.grid_size[var_path] > ZARR_READ_LIMIT:
        json_check = partial(_assert_same_leading_block, sources.json, expected, var_path)
    else:
        json_check = partial(_assert_same_read, sources.json, expected, var_path)
    problem = _problem(json_check)
    if problem is None:
        report.json_identical += 1
    else:
        report.wrong.append(f"json {var_path}: {problem}")
    if sources.grid_size[var_path] > ZARR_READ_LIMIT:
        check = partial(_same_keys, sources.json_fs, sources.parquet_fs, var_path)
    else:
        check = partial(_assert_same_read, sources.parquet, expected, var_path)
    problem = _problem(check)
    if problem is None:
        report.parquet_identical += 1
    else:
        report.wrong.append(f"parquet {var_path}: {problem}")
    ours = partial(_read_ours, sources.ours, var_path)
    problem = _problem(lambda: _assert_same(ours(), expected, var_path))
    if problem is None:
        report.refzarr_identical += 1
    else:
        report.wrong.append(f"refzarr reader {var_path}: {problem}")
    if sources.grid_size[var_path] <= ZARR_READ_LIMIT:
        problem = _problem(partial(_assert_same_read, sources.store, expected, var_path))
        if problem is None:
            report.store_identical += 1
        else:
            report.wrong.append(f"ReferenceStore {var_path}: {problem}")


def _assert_same_read(root: zarr.Group | Exception, expected: np.ndarray, path: str) -> None:
    _assert_same(_read(root, path), expected, path)


def _leading_block(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[slice, ...]:
    """A selection from the array's start covering at most `ZARR_READ_LIMIT` chunks: whole
    trailing dimensions while they fit, then as many chunks of the next as fit, one of the rest."""
    counts = [1] * len(shape)
    budget = ZARR_READ_LIMIT
    for dim in reversed(range(len(shape))):
        grid = -(-shape[dim] // chunks[dim]) if shape[dim] else 1
        counts[dim] = max(1, min(grid, budget))
        budget = max(1, budget // counts[dim])
    return tuple(slice(0, count * size) for count, size in zip(counts, chunks, strict=True))


def _assert_same_leading_block(
    root: zarr.Group | Exception, expected: np.ndarray, path: str
) -> None:
    """A leading block of a large array, read through zarr, equals that block of ``expected``."""
    if isinstance(root, Exception):
        raise root
    array = root[path.lstrip("/")]
    assert isinstance(array, zarr.Array), path
    block = _leading_block(array.shape, array.chunks)
    _assert_same(np.asarray(array[block]), expected[block], path)


def _problem(check: Callable[[], None]) -> str | None:
    """None when ``check()`` passes, else what went wrong (a failed read is wrong too)."""
    try:
        check()
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    return None


def _same_keys(json_fs: ReferenceFileSystem, parquet_fs: ReferenceFileSystem, path: str) -> None:
    """Every key of the array (metadata, chunks) is the same bytes through both sets."""
    prefix = path.lstrip("/") + "/"
    keys = sorted(
        k for k in json_fs.references if k.startswith(prefix) and "/" not in k[len(prefix) :]
    )
    assert keys, path
    assert parquet_fs.cat(keys) == json_fs.cat(keys), path


def corpus_report(path: Path, tmp_path: Path) -> Report:
    """Scan one file (skipping the unsupported), write JSON and Parquet, compare with h5py."""
    group = refzarr.scan(str(path), on_unsupported="skip")
    assert isinstance(group, ScannedGroup)
    sources = _open_sources(group, tmp_path / f"{path.name}.json", tmp_path / f"{path.name}.parq")
    skipped = {s.path: s.reason for s in group.skipped}
    report = Report(path.name)
    report.unsupported = [f"{where}: {_short(reason)}" for where, reason in skipped.items()]
    with h5py.File(path, "r") as f:
        for h5_path, var_path, ds in h5py_datasets(f):
            covering = _skipped_as(h5_path, skipped)
            if covering is not None:
                assert f"'{covering}'" in skipped[covering], f"reason does not name {covering}"
            elif is_dimension_only(ds):
                report.dimension_only += 1  # a netCDF dimension, not a variable: by design
            elif var_path not in sources.grid_size:
                report.dropped.append(h5_path)
            else:
                _check_dataset(sources, h5_path, var_path, ds, report)
    _check_raise_mode(path, group)
    return report


def _check_dataset(
    sources: _Sources, h5_path: str, var_path: str, ds: h5py.Dataset, report: Report
) -> None:
    try:
        expected = _h5py_values(ds)
    except (OSError, ValueError, TypeError) as exc:
        report.h5py_cannot_read.append(f"{h5_path}: {exc}")
        return
    report.h5py_reads += 1
    _compare(sources, var_path, expected, report)


def _skipped_as(h5_path: str, skipped: dict[str, str]) -> str | None:
    """The skipped path that covers a dataset: its own, or a skipped group (link) above it."""
    parts = h5_path.split("/")
    for end in range(len(parts), 1, -1):
        if "/".join(parts[:end]) in skipped:
            return "/".join(parts[:end])
    return None


def _short(reason: str) -> str:
    """A reason without its ``<file>: dataset '<path>': `` prefix (the table names both)."""
    return reason.split("': ", 1)[-1]


def _check_raise_mode(path: Path, skipping: ScannedGroup) -> None:
    """With ``on_unsupported="raise"`` the scan raises for the first thing it would skip."""
    if not skipping.skipped:
        assert refzarr.scan(str(path)) == skipping
        return
    with pytest.raises(UnsupportedFeatureError) as info:
        refzarr.scan(str(path))
    assert str(info.value) == skipping.skipped[0].reason
    first = skipping.skipped[0].path.partition("@")[0]
    assert f"'{first}'" in str(info.value)


@FASTPARQUET
@pytest.mark.skipif(not CORPUS_FILES, reason=f"no HDF5 / netCDF4 corpus under {CORPUS}")
def test_corpus_conformance(tmp_path: Path) -> None:
    reports = [corpus_report(path, tmp_path) for path in CORPUS_FILES]
    lines = [Report.HEADER]
    for report in reports:
        lines.append(report.row())
        lines += [f"    unsupported {reason}" for reason in report.unsupported]
        lines += [f"    h5py cannot read {reason}" for reason in report.h5py_cannot_read]
        lines += [f"    WRONG {reason}" for reason in report.wrong]
        lines += [f"    DROPPED {where}" for where in report.dropped]
    print("\n".join(lines))
    assert not [r.wrong for r in reports if r.wrong], "\n".join(lines)
    assert not [r.dropped for r in reports if r.dropped], "\n".join(lines)
    assert sum(r.json_identical for r in reports) > 200  # the corpus is really checked
