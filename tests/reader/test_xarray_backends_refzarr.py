"""xarray's own netCDF backend tests, with every dataset read back through refzarr.

``TestNetCDF4Data``, ``TestNetCDF4ViaDaskData`` and ``TestH5NetCDFData`` from
``xarray.tests.test_backends`` (shipped in xarray's wheel) are subclassed so that ``open`` (and
so ``roundtrip``) writes with xarray as the base class does, scans the file with refzarr,
writes the references as JSON and opens them with ``engine="refzarr"``. Tests that open the
file themselves with the class's engine test xarray, not refzarr, and pass as they do there.

`KNOWN` is the one list of tests that cannot pass through references, each with its reason;
they are strict xfails, so a fix shows up as a failure of the list.
"""

from __future__ import annotations

import pytest

from xarraykit import mark_known, through_refzarr

backends = pytest.importorskip("xarray.tests.test_backends")
from xarray.tests.conftest import time_unit, use_dask  # noqa: E402, F401  (their fixtures)

pytestmark = pytest.mark.slow  # ~390 tests, about 2-4 minutes on 2 busy cores

KNOWN: dict[str, str] = {
    "test_compression_encoding_h5py": (
        "h5netcdf's own encoding keys (compression, compression_opts): refzarr's engine "
        "reports netCDF4's (zlib, complevel, szip, blosc), which to_netcdf takes"
    ),
    "test_dump_encodings_h5py": (
        "h5netcdf's own encoding keys (compression='lzf', compression_opts): refzarr's "
        "engine reports netCDF4's"
    ),
}
"""Test name (without parameters) -> why it cannot pass through refzarr (strict xfails)."""


@pytest.fixture(autouse=True)
def _known_failures(request: pytest.FixtureRequest) -> None:
    mark_known(request, KNOWN)


_ThroughRefzarr = through_refzarr()


class TestRefzarrNetCDF4Data(_ThroughRefzarr, backends.TestNetCDF4Data):
    """netCDF4 files written by xarray (engine="netcdf4"), read through refzarr."""


class TestRefzarrNetCDF4ViaDaskData(_ThroughRefzarr, backends.TestNetCDF4ViaDaskData):
    """The same, opened with ``chunks=-1`` (dask arrays)."""


class TestRefzarrH5NetCDFData(_ThroughRefzarr, backends.TestH5NetCDFData):
    """netCDF4 files written by h5netcdf, read through refzarr."""
