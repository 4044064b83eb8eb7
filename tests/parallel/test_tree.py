"""`scan_and_combine`: the tree reduction on a dask.distributed cluster equals scanning and
combining in one process; a failing file is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from refzarr import ScanError
from refzarr.combine import combine
from refzarr.parallel import scan_and_combine, scan_many


@pytest.mark.parametrize(("fanin", "batch"), [(2, 1), (3, 2), (8, 64)])
def test_tree_equals_flat_combine(
    daily: list[Path], dask_client: Any, fanin: int, batch: int
) -> None:
    expected = combine(scan_many(daily, executor="serial"), concat_dims=["time"])
    found = scan_and_combine(
        daily, dask_client, {"concat_dims": ["time"]}, fanin=fanin, batch_size=batch
    )
    assert found == expected


def test_regex_coordinates_at_the_leaves(daily: list[Path], dask_client: Any) -> None:
    kwargs = {"concat_dims": ["time"], "coords": {"time": ("regex", r"_(\d{8})\.nc")}}
    expected = combine(scan_many(daily, executor="serial"), **kwargs)
    assert scan_and_combine(daily, dask_client, kwargs, fanin=2, batch_size=2) == expected


def test_failure_names_the_file(daily: list[Path], dask_client: Any, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.nc"
    corrupt.write_bytes(b"no HDF5 here" * 10)
    with pytest.raises(ScanError, match=r"corrupt\.nc"):
        scan_and_combine([*daily, corrupt], dask_client, {"concat_dims": ["time"]}, batch_size=3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"combine_kwargs": {}}, "needs 'concat_dims'"),
        ({"combine_kwargs": {"concat_dims": ["time"]}, "fanin": 1}, "fanin must be at least 2"),
    ],
)
def test_bad_arguments(daily: list[Path], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        scan_and_combine(daily, object(), **kwargs)
