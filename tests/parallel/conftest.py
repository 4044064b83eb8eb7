"""Fixtures of the parallel tests: a small daily archive and a dask.distributed cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dailykit import write_days


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Eight daily netCDF4 files."""
    return write_days(tmp_path_factory.mktemp("daily"), 8)


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    """A client of a local cluster of two worker processes, one thread each (closed after)."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            host="127.0.0.1",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client
