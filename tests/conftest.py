"""Shared fixtures: factories writing tiny netCDF4-like files into tmp_path, and their references.

pytest's default ("prepend") import mode puts this directory on ``sys.path`` when it loads this
file, so test modules anywhere below ``tests/`` import the kit as ``from strategies import ...``
and ``from roundtrip import ...`` (there are no ``__init__.py`` files under ``tests/``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# `make test` (and so CI) runs with --hypothesis-profile=ci: the same examples on every run,
# so a submission cannot fail on a newly drawn example; plain `pytest` explores at random.
# No timing checks either (no deadline, no "too slow" health check): a loaded machine must not
# fail a test whose result is right.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# plain `pytest` explores at random, but without timing checks either: helpers and benchmarks
# share these 2 cores, and a slow draw is no bug
settings.register_profile("explore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("explore")

# Asserts inside the kit report their operands like asserts in test modules do.
pytest.register_assert_rewrite("roundtrip", "strategies")

from roundtrip import INLINE_SMALL, KerchunkCase, kerchunk_hdf5_refs  # noqa: E402

# Default fill values of the netCDF-C library, as netCDF4 files carry them.
NC_FILL_FLOAT = np.float32(9.969209968386869e36)
NC_FILL_SHORT = np.int16(-32767)

# The shape of every variable in `write_netcdf`'s file, for tests that need to know.
TIME, LAT, LON, STEP = 6, 4, 5, 3


def _dimension(
    where: h5py.Group, name: str, values: np.ndarray, dimid: int, **attrs: Any
) -> h5py.Dataset:
    """A netCDF4 dimension: a 1-D coordinate variable that is an HDF5 dimension scale."""
    scale = where.create_dataset(name, data=values)
    scale.make_scale(name)
    scale.attrs["_Netcdf4Dimid"] = np.int32(dimid)
    for key, value in attrs.items():
        scale.attrs[key] = value
    return scale


def _attach(variable: h5py.Dataset, *scales: h5py.Dataset) -> None:
    for axis, scale in enumerate(scales):
        variable.dims[axis].attach_scale(scale)


def _temperature(f: h5py.File, dims: tuple[h5py.Dataset, ...]) -> None:
    """float32, NaN fill, gzip + shuffle, chunks that overhang the edge, a few NaNs."""
    values = np.arange(TIME * LAT * LON, dtype="f4").reshape(TIME, LAT, LON) / 4 - 20
    values[1, 2, 3] = np.nan
    values[5, 0, 0] = np.nan
    var = f.create_dataset(
        "temperature",
        data=values,
        chunks=(2, 3, 3),
        compression="gzip",
        compression_opts=4,
        shuffle=True,
        fillvalue=np.float32(np.nan),
    )
    var.attrs["_FillValue"] = np.float32(np.nan)
    var.attrs["long_name"] = "air temperature"
    var.attrs["units"] = "degC"
    _attach(var, *dims)


def _wind_speed(f: h5py.File, dims: tuple[h5py.Dataset, ...]) -> None:
    """int16 packed with scale_factor/add_offset, one fill-valued element."""
    packed = (np.arange(TIME * LAT, dtype="i2").reshape(TIME, LAT) * 37) % 2000
    packed[3, 1] = NC_FILL_SHORT
    var = f.create_dataset("wind_speed", data=packed, chunks=(3, 2), fillvalue=NC_FILL_SHORT)
    var.attrs["_FillValue"] = NC_FILL_SHORT
    # float64 packing attributes: JSON metadata cannot say "float32", so xarray would unpack
    # float32 attributes to float64 through references but to float32 from the file
    var.attrs["scale_factor"] = np.float64(0.01)
    var.attrs["add_offset"] = np.float64(2.5)
    var.attrs["units"] = "m/s"
    _attach(var, *dims)


def _sparse(f: h5py.File, dims: tuple[h5py.Dataset, ...]) -> None:
    """float64 whose middle chunk row is never written: it must read as the fill value."""
    var = f.create_dataset(
        "sparse", shape=(TIME, LON), chunks=(2, LON), dtype="f8", fillvalue=-999.0
    )
    var.attrs["_FillValue"] = np.float64(-999.0)
    var[0:2] = np.arange(2 * LON).reshape(2, LON) + 0.5
    var[4:6] = -np.arange(2 * LON).reshape(2, LON) - 0.25
    _attach(var, *dims)


def _forecast_group(f: h5py.File, lat: h5py.Dataset) -> None:
    """A nested group with its own dimension, a big-endian variable and group attributes."""
    group = f.create_group("forecast")
    group.attrs["institution"] = "Институт прогнозов"
    group.attrs["ensemble_size"] = np.int32(3)
    step = _dimension(group, "step", np.arange(STEP, dtype="i4") * 6, 3, units="hours")
    pressure = np.linspace(990, 1030, STEP * LAT).reshape(STEP, LAT).astype(">f4")
    var = group.create_dataset(
        "pressure", data=pressure, chunks=(1, LAT), fillvalue=NC_FILL_FLOAT.astype(">f4")
    )
    var.attrs["units"] = "hPa"
    _attach(var, step, lat)


def write_netcdf(path: Path) -> Path:
    """Write the standard netCDF4-like test file (made with h5py) at ``path``.

    Root dimensions ``time`` (float64, units/calendar), ``lat``, ``lon``; variables
    ``temperature`` (float32, NaN fill, gzip + shuffle), ``wind_speed`` (packed int16),
    ``sparse`` (chunks never written), ``station_count`` (scalar); group ``forecast`` with
    dimension ``step`` and big-endian ``pressure``; string attributes, some non-ASCII and
    with ``/``.
    """
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "refzarr test file: données, Daten, データ"
        f.attrs["Conventions"] = "CF-1.8"
        f.attrs["source"] = "tests/conftest.py"
        time = _dimension(
            f,
            "time",
            np.arange(TIME, dtype="f8") * 0.5,
            0,
            units="days since 2000-01-01 00:00:00",
            calendar="standard",
        )
        lat = _dimension(f, "lat", np.linspace(-45, 45, LAT, dtype="f4"), 1, units="degrees_north")
        lon = _dimension(f, "lon", np.linspace(0, 288, LON, dtype="f4"), 2, units="degrees_east")
        _temperature(f, (time, lat, lon))
        _wind_speed(f, (time, lat))
        _sparse(f, (time, lon))
        # an explicit _FillValue, as kerchunk's fill value makes xarray mask (and so promote)
        # integer variables read through references either way
        count = f.create_dataset("station_count", data=np.int32(42), fillvalue=np.int32(-1))
        count.attrs["_FillValue"] = np.int32(-1)
        count.attrs["long_name"] = "number of stations"
        _forecast_group(f, lat)
    return path


@pytest.fixture
def make_netcdf(tmp_path: Path) -> Callable[..., Path]:
    """Factory: ``make_netcdf(name="sample.nc")`` writes `write_netcdf`'s file into tmp_path."""

    def make(name: str = "sample.nc") -> Path:
        return write_netcdf(tmp_path / name)

    return make


@pytest.fixture
def netcdf_file(make_netcdf: Callable[..., Path]) -> Path:
    """The standard netCDF4-like test file."""
    return make_netcdf()


@pytest.fixture
def make_data_file(tmp_path: Path) -> Callable[[str, bytes], Path]:
    """Factory: ``make_data_file(name, data)`` writes ``data`` to tmp_path/name."""

    def make(name: str, data: bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    return make


@pytest.fixture(params=[0, INLINE_SMALL], ids=["refs-only", "small-inlined"])
def kerchunk_case(request: pytest.FixtureRequest, netcdf_file: Path) -> KerchunkCase:
    """The standard file and kerchunk's references for it, without and with inlining."""
    threshold = request.param
    return KerchunkCase(netcdf_file, kerchunk_hdf5_refs(netcdf_file, threshold), threshold)


# -- S3 (moto_server) -------------------------------------------------------------------------

S3_HOST = "127.0.0.1"
"""The only address the test S3 server listens on (team rule: never another address)."""

S3_START_TIMEOUT = 15.0
"""Seconds `s3_server` waits for moto_server to answer before failing the tests that need it."""

S3_CREDENTIALS = {"key": "testing", "secret": "testing"}
"""moto accepts any credentials; these fake ones are passed explicitly, never through env."""

_AWS_ENV_PREFIXES = ("AWS_", "BOTO_")
_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def _free_port() -> int:
    """A TCP port free on `S3_HOST` right now (the OS picks it for a socket bound to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((S3_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _server_env(config_dir: Path) -> dict[str, str]:
    """The developer's environment without AWS settings or proxies, plus moto's fake ones."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(_AWS_ENV_PREFIXES) and name not in _PROXY_ENV
    }
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=str(config_dir / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(config_dir / "aws-credentials"),
    )
    return env


def _moto_command(port: int) -> list[str]:
    script = Path(sys.executable).with_name("moto_server")
    launcher = [str(script)] if script.exists() else [sys.executable, "-m", "moto.server"]
    return [*launcher, "-H", S3_HOST, "-p", str(port)]


def _wait_until_answering(process: subprocess.Popen[bytes], endpoint: str, log: Path) -> None:
    """Return once ``endpoint`` answers HTTP; fail with the server's log otherwise."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxies
    deadline = time.monotonic() + S3_START_TIMEOUT
    while True:
        if process.poll() is not None:
            pytest.fail(
                f"moto_server exited with code {process.returncode} before answering on "
                f"{endpoint}; its output:\n{log.read_text(errors='replace')}",
                pytrace=False,
            )
        try:
            with opener.open(endpoint, timeout=1):
                return
        except urllib.error.HTTPError:
            return  # an HTTP error status is an answer too
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(
                f"moto_server did not answer on {endpoint} within {S3_START_TIMEOUT:.0f} s; "
                f"its output:\n{log.read_text(errors='replace')}",
                pytrace=False,
            )
        time.sleep(0.05)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server for the whole session; yields its endpoint URL ``http://127.0.0.1:<port>``.

    The server is ``moto_server`` (from this interpreter's environment) listening on
    127.0.0.1 only, on a port the OS reported free. It runs with the developer's AWS and
    proxy environment variables removed and fake credentials set, so nothing of a real AWS
    setup reaches it. Startup waits at most `S3_START_TIMEOUT` seconds and fails with the
    server's output; the process is terminated (killed if need be) when the session ends,
    also after failures. Tests normally want the `s3` fixture, which builds on this one.
    """
    workdir = tmp_path_factory.mktemp("moto")
    log = workdir / "moto_server.log"
    port = _free_port()
    endpoint = f"http://{S3_HOST}:{port}"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            _moto_command(port),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=_server_env(workdir),
        )
    try:
        _wait_until_answering(process, endpoint, log)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def s3(
    s3_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, Any]]]:
    """A fresh, empty bucket on `s3_server`: yields ``(bucket, storage_options)``.

    ``storage_options`` are s3fs options (key, secret, ``client_kwargs`` with the endpoint
    and region) to pass wherever fsspec options go: ``refzarr.read/write(...,
    storage_options=...)``, ``fsspec.filesystem("s3", **storage_options)``, or
    ``remote_options`` of a ReferenceFileSystem over ``s3://`` data. URLs are
    ``s3://<bucket>/<key>``; the bucket name is unique per test.

    For the test's duration AWS_* / BOTO_* and proxy variables of the developer's environment
    are removed (config and credentials files point at nothing), and s3fs's instance cache is
    cleared before and after, so no test sees another's filesystem or stale listings.
    """
    import s3fs

    for name in list(os.environ):
        if name.startswith(_AWS_ENV_PREFIXES) or name in _PROXY_ENV:
            monkeypatch.delenv(name)
    nowhere = tmp_path_factory.mktemp("aws-config")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(nowhere / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(nowhere / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    options: dict[str, Any] = {
        **S3_CREDENTIALS,
        "client_kwargs": {"endpoint_url": s3_server, "region_name": "us-east-1"},
    }
    bucket = f"refzarr-test-{uuid.uuid4().hex[:16]}"
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(**options)  # cached: the test's own s3fs calls reuse its client
    # us-east-1 takes no LocationConstraint, which s3fs's mkdir would send
    fs.call_s3("create_bucket", Bucket=bucket)
    try:
        yield bucket, options
    finally:
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3_proxy(
    s3: tuple[str, dict[str, Any]], s3_server: str
) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """A fresh bucket reached through a counting proxy: yields ``(bucket, options, proxy)``.

    ``options`` are s3fs storage options whose endpoint is a `s3proxy.CountingProxy` in front
    of `s3_server` (on 127.0.0.1, a free port): every request through them is recorded, and
    ``proxy.fail(...)`` makes chosen requests fail. The `s3` fixture's own options still reach
    moto directly (uploads that should not be counted). The proxy stops after the test.
    """
    from s3proxy import CountingProxy

    bucket, direct = s3
    with CountingProxy(s3_server) as proxy:
        options = {**direct, "client_kwargs": {**direct["client_kwargs"]}}
        options["client_kwargs"]["endpoint_url"] = proxy.endpoint
        yield bucket, options, proxy
