"""xarray's own netCDF3 backend tests, with every dataset read back through refzarr.

``TestNetCDF3ViaNetCDF4Data`` (CDF-1 written by netCDF-C) and ``TestScipyFilePath`` (CDF-2
written by scipy) from ``xarray.tests.test_backends`` are subclassed so that ``open`` (and so
``roundtrip``) writes with xarray as the base class does, scans the file with refzarr's
netCDF3 scanner, writes the references as JSON and opens them with ``engine="refzarr"``.
Tests that open the file themselves with the class's engine test xarray, not refzarr, and
pass as they do there.

`KNOWN` is the one list of tests that cannot pass through references, each with its reason;
they are strict xfails, so a fix shows up as a failure of the list.
"""

from __future__ import annotations

import pytest

from xarraykit import mark_known, through_refzarr

backends = pytest.importorskip("xarray.tests.test_backends")
pytest.importorskip("scipy")
from xarray.tests.conftest import time_unit, use_dask  # noqa: E402, F401  (their fixtures)

pytestmark = pytest.mark.slow

KNOWN: dict[str, str] = {}
"""Test name (without parameters) -> why it cannot pass through refzarr (strict xfails)."""


@pytest.fixture(autouse=True)
def _known_failures(request: pytest.FixtureRequest) -> None:
    mark_known(request, KNOWN)


_ThroughRefzarr = through_refzarr("netcdf3")


class TestRefzarrNetCDF3ViaNetCDF4Data(_ThroughRefzarr, backends.TestNetCDF3ViaNetCDF4Data):
    """CDF-1 files written by xarray through netCDF4-python, read through refzarr."""


class TestRefzarrScipyFilePath(_ThroughRefzarr, backends.TestScipyFilePath):
    """CDF-2 files written by xarray through scipy, read through refzarr."""
