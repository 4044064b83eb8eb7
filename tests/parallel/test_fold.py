"""`CombineFold`: groups combined in batches as they arrive write the same bytes as one
combine of every group (JSON v0 and v1, Parquet), and fail with the same error, naming the
same files; options whose result could depend on the batches are combined at once."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import netCDF4
import pytest

import refzarr
from dailykit import write_day, write_days
from refzarr.combine import combine
from refzarr.model import RefGroup
from refzarr.parallel import fold as fold_module
from refzarr.parallel import scan_and_combine, scan_many
from refzarr.parallel.fold import CombineFold


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Seven daily files (seven: batches of 2 and 3 leave a short last batch)."""
    return [str(p) for p in write_days(tmp_path_factory.mktemp("fold"), 7)]


@pytest.fixture(scope="module")
def scanned(days: list[str]) -> dict[str, RefGroup]:
    return dict(zip(days, scan_many(days, executor="serial"), strict=True))


def digests(group: RefGroup, folder: Path) -> dict[str, str]:
    """The md5 of the set written as JSON v0, JSON v1 and Parquet (every file, by name)."""
    folder.mkdir()
    found = {}
    for name, kwargs in (("v0.json", {}), ("v1.json", {"version": 1}), ("set.parq", {})):
        path = folder / name
        refzarr.write(group, path, **kwargs)
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        digest = hashlib.md5()
        for file in files:
            digest.update(file.relative_to(folder).as_posix().encode())
            digest.update(file.read_bytes())
        found[name] = digest.hexdigest()
    return found


def folded(
    urls: Sequence[str], groups: dict[str, RefGroup], kwargs: dict[str, Any], size: int
) -> tuple[RefGroup, bool]:
    """The fold's result, and whether it combined in batches."""
    fold = CombineFold(kwargs, size)
    for url in urls:
        fold.add(url, groups[url])
    batched = fold.folded
    return fold.result(), batched


def outcome(run: Any) -> str:
    """``"ok"``, or the error raised as ``"Type: message"``."""
    try:
        run()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("order", ["sorted", "reversed"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"concat_dims": ["time"]},
        {"concat_dims": "time", "identical_dims": ["lat", "lon"]},
        {"concat_dims": ["time"], "compat": "override"},
        {"concat_dims": ["time"], "coords": {"time": "data"}},
    ],
    ids=["plain", "identical", "override", "data"],
)
def test_batches_write_what_one_combine_writes(
    days: list[str],
    scanned: dict[str, RefGroup],
    tmp_path: Path,
    kwargs: dict[str, Any],
    order: str,
    size: int,
) -> None:
    urls = days if order == "sorted" else days[::-1]
    expected = combine([scanned[u] for u in urls], urls=urls, **kwargs)
    found, batched = folded(urls, scanned, kwargs, size)
    assert batched  # combined in batches, not at once
    assert digests(found, tmp_path / "fold") == digests(expected, tmp_path / "one")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"concat_dims": ["time"], "coords": {"time": ("regex", r"_(\d{8})\.nc")}},
        {"concat_dims": ["member"], "compat": "override"},
        {"concat_dims": []},
    ],
    ids=["regex", "new-dimension", "merge"],
)
def test_options_whose_batches_could_differ_combine_at_once(
    days: list[str], scanned: dict[str, RefGroup], tmp_path: Path, kwargs: dict[str, Any]
) -> None:
    urls = days[:1] if not kwargs["concat_dims"] else days
    found, batched = folded(urls, scanned, kwargs, 2)
    assert not batched
    expected = combine([scanned[u] for u in urls], urls=urls, **kwargs)
    assert digests(found, tmp_path / "fold") == digests(expected, tmp_path / "one")


def test_other_time_units_combine_at_once(
    days: list[str], scanned: dict[str, RefGroup], tmp_path: Path
) -> None:
    """A file in other CF units: combined at once (a batch would re-encode its times into
    its own first file's units)."""
    other = str(write_day(tmp_path / "air_hours.nc", 7 * 24, units="hours since 2020-01-01"))
    groups = {**scanned, other: refzarr.scan(other)}
    urls = [*days, other]
    found, batched = folded(urls, groups, {"concat_dims": ["time"]}, 2)
    assert not batched
    expected = combine([groups[u] for u in urls], urls=urls, concat_dims=["time"])
    assert digests(found, tmp_path / "fold") == digests(expected, tmp_path / "one")


def _duplicate(days: list[str], folder: Path) -> list[str]:
    """Day 1 again, in another batch."""
    return [*days, str(write_day(folder / "air_again.nc", 1))]


def _extra_variable(days: list[str], folder: Path) -> list[str]:
    """A file holding one more variable, at the end."""
    path = write_day(folder / "air_extra.nc", 9)
    with netCDF4.Dataset(path, "a") as nc:
        nc.createVariable("extra", "f4", ("time", "lat", "lon"))[0] = 1.0
    return [*days, str(path)]


def _not_monotonic(days: list[str], folder: Path) -> list[str]:
    """A file of three steps whose times go back and forth."""
    path = write_day(folder / "air_backwards.nc", 20)
    with netCDF4.Dataset(path, "a") as nc:
        nc["air"][1:3] = nc["air"][0:1]
        nc["time"][:] = [21.0, 20.0, 22.0]
    return [*days, str(path)]


def _descending(days: list[str], folder: Path) -> list[str]:
    """A file of two steps whose times decrease: one combine orders every file descending
    (the first file of several steps sets the direction); its batch's result disagrees with
    the others'."""
    path = write_day(folder / "air_down.nc", 20)
    with netCDF4.Dataset(path, "a") as nc:
        nc["air"][1] = nc["air"][0]
        nc["time"][:] = [21.0, 20.0]
    return [*days, str(path)]


def _interleaved(days: list[str], folder: Path) -> list[str]:
    """Every other day first: each batch's days lie between another's (a plain combine
    sorts them; batches' results overlap)."""
    return days[0::2] + days[1::2]


@pytest.mark.parametrize(
    "files",
    [_duplicate, _extra_variable, _not_monotonic, _descending, _interleaved],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize("size", [2, 3])
def test_errors_and_results_are_one_combines(
    days: list[str], scanned: dict[str, RefGroup], tmp_path: Path, files: Any, size: int
) -> None:
    urls = files(days, tmp_path)
    groups = {**scanned, **{u: refzarr.scan(u) for u in urls if u not in scanned}}
    kwargs = {"concat_dims": ["time"]}
    expected = outcome(lambda: combine([groups[u] for u in urls], urls=urls, **kwargs))
    fold = CombineFold(kwargs, size)
    for url in urls:
        fold.add(url, groups[url])
    assert outcome(fold.result) == expected
    if files not in (_descending, _interleaved):
        assert expected.startswith("IncompatibleError: ")
        assert Path(urls[-1]).name in expected or Path(urls[1]).name in expected


def test_bad_sizes_and_arguments() -> None:
    with pytest.raises(ValueError, match="at least 2 groups"):
        CombineFold({"concat_dims": ["time"]}, 1)
    with pytest.raises(TypeError, match="URL in add"):
        CombineFold({"concat_dims": ["time"], "urls": ["a"]})
    with pytest.raises(ValueError, match="at least one group"):
        CombineFold({"concat_dims": ["time"]}).result()


@pytest.mark.parametrize("executor", ["serial", "threads"])
def test_scan_and_combine_in_this_process(
    days: list[str],
    scanned: dict[str, RefGroup],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    executor: str,
) -> None:
    """`scan_and_combine` without a dask client: scanned on ``executor``, folded here."""
    monkeypatch.setattr(fold_module, "FOLD_SIZE", 2)
    kwargs = {"concat_dims": ["time"], "identical_dims": ["lat", "lon"]}
    found = scan_and_combine(days, executor, kwargs, batch_size=3)
    expected = combine(list(scanned.values()), urls=days, **kwargs)
    assert digests(found, tmp_path / "fold") == digests(expected, tmp_path / "one")


def test_scan_and_combine_in_this_process_names_a_failing_file(
    days: list[str], tmp_path: Path
) -> None:
    corrupt = tmp_path / "corrupt.nc"
    corrupt.write_bytes(b"no HDF5 here" * 10)
    with pytest.raises(refzarr.ScanError, match=r"corrupt\.nc"):
        scan_and_combine([*days, corrupt], "serial", {"concat_dims": ["time"]})
