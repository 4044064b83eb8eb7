"""Reading data through references: refzarr against h5py, netCDF4 and fsspec + zarr, in one run.

Three scenarios, each printed side by side with ratios:

``local``
    Whole-variable read of a zlib-compressed float32 netCDF4 variable chunked (1, 256, 256)
    (about 1 GB by default, ``--mb``) from local disk: ``refzarr.open_dataset`` vs
    ``xr.open_dataset(file)`` (netCDF4) vs h5py vs fsspec ``ReferenceFileSystem`` + zarr
    (``xr.open_dataset("reference://", engine="zarr")``). Also peak memory over the result size.
``s3``
    A variable of 4,096 small chunks (float32 (1024, 64, 64), chunks (1, 32, 32), gzip; an
    object of about 12 MB) on a moto S3 server started here on 127.0.0.1, read whole: refzarr
    vs one plain GET of the whole object vs fsspec reference + zarr, with the number of GET
    requests each made (counted by a proxy between the client and moto).
``first``
    Time to the first value of a 10-million-reference set (JSON and Parquet): open, then read
    one chunk; refzarr vs fsspec's ReferenceFileSystem / LazyReferenceMapper + zarr.
``store``
    Whole read of a gzip float32 HDF5 dataset (400, 512, 512), chunks (1, 512, 512), through
    `refzarr.ReferenceStore` in each of its modes (decoded, the default; ``decoded=False``,
    stored bytes checked by a second decode; ``check_chunks=False``, stored bytes unchecked)
    under ``xr.open_zarr`` (dask, as by default) and ``zarr.open_array``, vs
    ``refzarr.open_dataset`` and h5py.
``sources``
    What comparing each source file with its scan's record costs (``check_sources``): a
    Parquet set combining ``--files`` daily netCDF4 files (those of ``bench_combine.py``),
    opened before the clock, then ``air`` read whole (4 chunks per file) and one value per
    file (one chunk each), with ``check_sources="local"`` (the default: one ``stat`` per file)
    and ``"none"``, taking turns.

Every measurement runs in a fresh Python process (imports before the clock, xarray's first-use
import of dask included; peak resident memory is the child's own ``ru_maxrss``); times (wall
clock, and the process's CPU time, all its threads: steadier on a shared machine) are medians
of ``--repeat`` runs. Generated files live in ``benchmarks/.cache/read/`` and are reused.

Usage::

    python benchmarks/bench_read.py                        # everything, as the issue asks
    python benchmarks/bench_read.py --only local --mb 128  # a quick run
    python benchmarks/bench_read.py --only store --steps 100
    python benchmarks/bench_read.py --only sources --files 1000 --repeat 7
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "read"
VARIABLE = "air"

# -- generating the data (once) ---------------------------------------------------------------


def local_file(mb: int) -> Path:
    """A netCDF4 file with ``air`` float32 (T, 256, 256), chunks (1, 256, 256), zlib."""
    import netCDF4
    import numpy as np

    steps = max(1, mb * 2**20 // (256 * 256 * 4))
    path = CACHE / f"local_{steps}.nc"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:256, 0:256].astype(np.float32)
    base = 280 + 10 * np.sin(y / 20) * np.cos(x / 30)
    with netCDF4.Dataset(partial, "w") as ds:
        ds.createDimension("time", steps)
        ds.createDimension("lat", 256)
        ds.createDimension("lon", 256)
        var = ds.createVariable(
            VARIABLE, "f4", ("time", "lat", "lon"), zlib=True, complevel=4, chunksizes=(1, 256, 256)
        )
        for start in range(0, steps, 64):
            stop = min(start + 64, steps)
            noise = rng.normal(0, 1, (stop - start, 256, 256)).astype(np.float32)
            var[start:stop] = np.round(base + noise, 2)
    partial.rename(path)
    return path


def reference_sets(source: Path, kind: str) -> tuple[Path, Path]:
    """refzarr's JSON references (our scan) and kerchunk's (for fsspec) of ``source``."""
    ours = source.with_suffix(f".{kind}.refzarr.json")
    theirs = source.with_suffix(f".{kind}.kerchunk.json")
    if not ours.exists():
        import refzarr

        refzarr.write(refzarr.scan(str(source)), ours)
    if not theirs.exists():
        import ujson
        from kerchunk.hdf import SingleHdf5ToZarr

        with open(source, "rb") as f:
            refs = SingleHdf5ToZarr(f, url=str(source)).translate()
        theirs.write_text(ujson.dumps(refs))
    return ours, theirs


# -- worker side: one measurement per fresh process -------------------------------------------


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def task_local(tool: str, args: dict[str, Any]) -> Callable[[], object]:
    """Whole-variable read from local disk."""
    import xarray as xr

    source = Path(args["source"])
    if tool == "refzarr":
        import refzarr

        return lambda: refzarr.open_dataset(args["ours"])[VARIABLE].values
    if tool == "netCDF4":
        return lambda: xr.open_dataset(source, engine="netcdf4")[VARIABLE].values
    if tool == "h5py":
        import h5py

        def read_h5py() -> object:
            with h5py.File(source, "r") as f:
                return f[VARIABLE][...]

        return read_h5py
    if tool == "fsspec+zarr":
        return lambda: _fsspec_dataset(args["theirs"], "file", {})[VARIABLE].values
    raise ValueError(tool)


def _fsspec_dataset(refs: str, protocol: str, options: dict[str, Any]) -> Any:
    import xarray as xr

    # a JSON file is handed over parsed: ReferenceFileSystem refuses a local (synchronous)
    # target filesystem next to an asynchronous remote one such as s3
    fo: Any = refs
    if refs.endswith(".json") and protocol != "file":
        with open(refs) as f:
            fo = json.load(f)
    return xr.open_dataset(
        "reference://",
        engine="zarr",
        backend_kwargs={
            "consolidated": False,
            "storage_options": {
                "fo": fo,
                "remote_protocol": protocol,
                # zarr's store is asynchronous, so the remote filesystem must be too
                "remote_options": {**options, "asynchronous": True} if options else options,
                "skip_instance_cache": True,
            },
        },
    )


def task_s3(tool: str, args: dict[str, Any]) -> Callable[[], object]:
    """Whole-variable read over the S3 proxy."""
    import s3fs  # noqa: F401  (imported before the clock, for every tool)

    options = args["storage_options"]
    if tool == "refzarr":
        import refzarr

        return lambda: refzarr.open_dataset(args["ours"], storage_options=options)[VARIABLE].values
    if tool == "plain GET":
        import fsspec

        return lambda: fsspec.filesystem("s3", skip_instance_cache=True, **options).cat_file(
            args["url"]
        )
    if tool == "fsspec+zarr":
        return lambda: _fsspec_dataset(args["theirs"], "s3", options)[VARIABLE].values
    raise ValueError(tool)


def task_first(tool: str, args: dict[str, Any]) -> Callable[[], object]:
    """Open a 10M-reference set and read its first value."""
    if tool.startswith("refzarr"):
        import refzarr

        return lambda: refzarr.open_dataset(args["refs"])["data"][0, 0].values
    if tool.startswith("fsspec"):
        return lambda: _fsspec_dataset(args["refs"], "file", {})["data"][0, 0].values
    raise ValueError(tool)


STORE_MODES = {
    "decoded": {},
    "stored+checked": {"decoded": False},
    "unchecked": {"check_chunks": False},
}
"""`ReferenceStore` keyword arguments of each mode measured by the ``store`` scenario."""


def task_store(tool: str, args: dict[str, Any]) -> Callable[[], object]:
    """Whole read through `ReferenceStore` (``"xarray <mode>"`` / ``"zarr <mode>"``), refzarr's
    own reader or h5py."""
    import xarray as xr
    import zarr

    import refzarr

    if tool == "refzarr":
        return lambda: refzarr.open_dataset(args["ours"])[VARIABLE].values
    if tool == "h5py":
        import h5py

        def read_h5py() -> object:
            with h5py.File(args["source"], "r") as f:
                return f[VARIABLE][...]

        return read_h5py
    reader, _, mode = tool.partition(" ")
    options = STORE_MODES[mode]
    group = refzarr.read(args["ours"])  # parsed before the clock: the read is measured

    def store() -> refzarr.ReferenceStore:
        return refzarr.ReferenceStore(group, **options)

    if reader == "xarray":
        return lambda: xr.open_zarr(store(), zarr_format=2)[VARIABLE].values
    if reader == "zarr":
        return lambda: zarr.open_array(store(), path=VARIABLE, mode="r", zarr_format=2)[...]
    raise ValueError(tool)


def task_sources(tool: str, args: dict[str, Any]) -> Callable[[], object]:
    """``"<whole|point> <local|none>"``: a combined set opened (before the clock), then
    ``air`` read whole or one value per file, its sources checked as the mode says."""
    import refzarr

    what, _, mode = tool.partition(" ")
    ds = refzarr.open_dataset(args["refs"], check_sources=mode)
    if what == "whole":
        return lambda: ds[VARIABLE].values
    return lambda: ds[VARIABLE][:, 0, 0].values


TASKS = {
    "local": task_local,
    "s3": task_s3,
    "first": task_first,
    "store": task_store,
    "sources": task_sources,
}


def _import_lazy_modules() -> None:
    """Import before the clock what the tools import on first use: dask, when installed
    (xarray checks every new variable against dask arrays; 0.4-0.6 s once per process), zarr
    (xarray's zarr engine, for fsspec + zarr) and refzarr's reader (``refzarr.open_dataset`` is
    a lazy attribute: its modules, numcodecs among them, load on first access)."""
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    import refzarr

    refzarr.open_dataset  # noqa: B018  (the attribute access is the import)
    with contextlib.suppress(ImportError):
        import dask.array  # noqa: F401


def run_worker(task: str, tool: str, args_json: str) -> None:
    """Child process: build the call (imports), time it once, print JSON."""
    args = json.loads(args_json)
    call = TASKS[task](tool, args)
    _import_lazy_modules()
    before = _rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    try:
        result = call()
        error = None
    except Exception as exc:  # reported in the table, never hidden
        result, error = None, f"{type(exc).__name__}: {str(exc)[:120]}"
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    nbytes = getattr(result, "nbytes", None) or (len(result) if isinstance(result, bytes) else 0)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu": cpu,
                "peak_mb": _peak_mb(),
                "before_mb": before,
                "result_mb": nbytes / 2**20,
                "error": error,
            }
        )
    )


def spawn(task: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """One measurement in a fresh process."""
    done = subprocess.run(
        [sys.executable, __file__, "--worker", task, tool, json.dumps(args)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "crashed"}
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def measure(task: str, tool: str, args: dict[str, Any], repeat: int) -> dict[str, Any]:
    """Median seconds and largest peak over ``repeat`` fresh processes."""
    return _summary([spawn(task, tool, args) for _ in range(repeat)])


def measure_interleaved(
    task: str, tools: list[str], args: dict[str, Any], repeat: int
) -> dict[str, dict[str, Any]]:
    """`measure` for several tools, taking turns (one run of each, ``repeat`` times), so that
    a change of load on a shared machine weighs on every tool alike."""
    runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
    for _ in range(repeat):
        for tool in tools:
            runs[tool].append(spawn(task, tool, args))
    return {tool: _summary(found) for tool, found in runs.items()}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [r["error"] for r in runs if r.get("error")]
    if errors:
        return {"error": errors[0]}
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "peak_mb": max(r["peak_mb"] for r in runs),
        "extra_mb": max(r["peak_mb"] - r["before_mb"] for r in runs),
        "result_mb": runs[0]["result_mb"],
    }


# -- scenarios --------------------------------------------------------------------------------


def scenario_local(mb: int, repeat: int) -> list[list[str]]:
    source = local_file(mb)
    ours, theirs = reference_sets(source, "local")
    args = {"source": str(source), "ours": str(ours), "theirs": str(theirs)}
    results = {
        tool: measure("local", tool, args, repeat)
        for tool in ("refzarr", "h5py", "netCDF4", "fsspec+zarr")
    }
    return _rows("local whole read", results, base="h5py")


def scenario_s3(repeat: int) -> list[list[str]]:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from s3proxy import CountingProxy

    source = _small_chunks_file()
    with _moto() as endpoint, CountingProxy(endpoint) as proxy:
        options = {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": proxy.endpoint, "region_name": "us-east-1"},
        }
        url = _upload(source, options)
        ours, theirs = _remote_references(source, url, options)
        args = {"url": url, "ours": ours, "theirs": theirs, "storage_options": options}
        results = {}
        for tool in ("refzarr", "plain GET", "fsspec+zarr"):
            proxy.reset()
            results[tool] = measure("s3", tool, args, repeat)
            results[tool]["gets"] = proxy.count("GET", f"/{url[5:]}") / repeat
    return _rows("s3 4,096 chunks", results, base="plain GET", counts=True)


def scenario_first(repeat: int) -> list[list[str]]:
    # built in a child process: a child forked from a parent holding the 10M-reference group
    # would start with the parent's peak memory (ru_maxrss survives fork and exec)
    subprocess.run([sys.executable, __file__, "--generate-first"], check=True)
    json_refs, parquet_refs = _ten_million_references()
    results = {
        "refzarr json": measure("first", "refzarr json", {"refs": str(json_refs)}, repeat),
        "fsspec json": measure("first", "fsspec json", {"refs": str(json_refs)}, repeat),
        "refzarr parquet": measure("first", "refzarr parq", {"refs": str(parquet_refs)}, repeat),
        "fsspec parquet": measure("first", "fsspec parq", {"refs": str(parquet_refs)}, repeat),
    }
    return _rows("first value, 10M refs", results, base="fsspec json")


def scenario_store(steps: int, repeat: int) -> list[list[str]]:
    source = _store_file(steps)
    ours = source.with_suffix(".refzarr.json")
    if not ours.exists():
        import refzarr

        refzarr.write(refzarr.scan(str(source)), ours)
    args = {"source": str(source), "ours": str(ours)}
    tools = [f"{reader} {mode}" for reader in ("xarray", "zarr") for mode in STORE_MODES]
    results = measure_interleaved("store", [*tools, "refzarr", "h5py"], args, repeat)
    return _rows(f"store ({steps}, 512, 512)", results, base="xarray unchecked")


def scenario_sources(files: int, repeat: int) -> list[list[str]]:
    refs = _combined_set(files)
    tools = [f"{what} {mode}" for what in ("whole", "point") for mode in ("local", "none")]
    results = measure_interleaved("sources", tools, {"refs": str(refs)}, repeat)
    rows = _rows(f"sources, {files:,} files", {t: results[t] for t in tools[:2]}, base=tools[1])
    return rows + _rows(
        f"sources, {files:,} files", {t: results[t] for t in tools[2:]}, base=tools[3]
    )


def _combined_set(count: int) -> Path:
    """The Parquet set of ``bench_combine.py``'s ``count`` daily files along ``time``."""
    import bench_combine

    refs = CACHE / f"sources_{count}.parq"
    if refs.exists():
        return refs
    import refzarr

    bench_combine.ensure_files(bench_combine.CACHE, count)
    paths = bench_combine.files(bench_combine.CACHE, count)
    group = refzarr.combine(refzarr.scan_many(paths), concat_dims=["time"])
    CACHE.mkdir(parents=True, exist_ok=True)
    refzarr.write(group, refs)
    return refs


def _store_file(steps: int) -> Path:
    """``air`` float32 (steps, 512, 512), chunks (1, 512, 512), gzip level 4, in HDF5."""
    import h5py
    import numpy as np

    path = CACHE / f"store_{steps}.h5"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:512, 0:512].astype(np.float32)
    base = 280 + 10 * np.sin(y / 40) * np.cos(x / 60)
    partial = path.with_suffix(".part")
    with h5py.File(partial, "w") as f:
        var = f.create_dataset(
            VARIABLE,
            (steps, 512, 512),
            dtype="f4",
            chunks=(1, 512, 512),
            compression="gzip",
            compression_opts=4,
        )
        for start in range(0, steps, 50):
            stop = min(start + 50, steps)
            noise = rng.normal(0, 1, (stop - start, 512, 512)).astype(np.float32)
            var[start:stop] = np.round(base + noise, 2)
    partial.rename(path)
    return path


# -- S3 helpers -------------------------------------------------------------------------------


def _small_chunks_file() -> Path:
    import h5py
    import numpy as np

    path = CACHE / "small_chunks.h5"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    data = np.round(rng.normal(280, 5, (1024, 64, 64)), 1).astype(np.float32)
    with h5py.File(path.with_suffix(".part"), "w") as f:
        var = f.create_dataset(VARIABLE, data=data, chunks=(1, 32, 32), compression="gzip")
        for axis, name in enumerate(("time", "y", "x")):
            f[name] = np.arange(data.shape[axis], dtype="i4")
            f[name].make_scale(name)
            var.dims[axis].attach_scale(f[name])
    path.with_suffix(".part").rename(path)
    return path


class _moto:
    """moto_server on 127.0.0.1 (a free port) for the duration of the block."""

    def __enter__(self) -> str:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        script = Path(sys.executable).with_name("moto_server")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HTTP"))}
        self.process = subprocess.Popen(
            [str(script), "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        endpoint = f"http://127.0.0.1:{port}"
        import urllib.request

        for _ in range(200):
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except OSError as exc:
                if getattr(exc, "code", None):
                    break
                time.sleep(0.05)
        return endpoint

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def _upload(source: Path, options: dict[str, Any]) -> str:
    import fsspec

    fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)
    fs.call_s3("create_bucket", Bucket="bench")  # us-east-1: no LocationConstraint
    url = f"s3://bench/{source.name}"
    fs.put_file(str(source), url)
    return url


def _remote_references(source: Path, url: str, options: dict[str, Any]) -> tuple[str, str]:
    import refzarr

    ours = CACHE / "s3.refzarr.json"
    refzarr.write(refzarr.scan(url, storage_options=options), ours)
    theirs = CACHE / "s3.kerchunk.json"
    from kerchunk.hdf import SingleHdf5ToZarr

    with open(source, "rb") as f:
        refs = SingleHdf5ToZarr(f, url=url).translate()
    theirs.write_text(json.dumps(refs))
    return str(ours), str(theirs)


# -- the 10M-reference set --------------------------------------------------------------------


def _ten_million_references() -> tuple[Path, Path]:
    """10M references to 1,000 real zlib chunks in one local file (behind 1,000 links)."""
    import numpy as np

    import refzarr
    from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup

    folder = CACHE / "ten_million"
    json_path, parquet_path = folder / "refs.json", folder / "refs.parq"
    if json_path.exists() and parquet_path.exists():
        return json_path, parquet_path
    folder.mkdir(parents=True, exist_ok=True)
    import zlib

    rng = np.random.default_rng(0)
    blobs = [
        zlib.compress(rng.normal(0, 1, (10, 100)).astype("<f4").tobytes(), 4) for _ in range(1000)
    ]
    data = folder / "chunks.bin"
    data.write_bytes(b"".join(blobs))
    sizes = np.array([len(b) for b in blobs], dtype=np.uint64)
    starts = np.cumsum(sizes) - sizes
    links = []
    for i in range(1000):
        link = folder / f"file_{i:04d}.bin"
        if not link.exists():
            link.symlink_to(data)
        links.append(str(link))
    grid = (10_000, 1_000)
    pick = rng.integers(0, 1000, grid)
    manifest = ChunkManifest.from_arrays(
        links,
        np.repeat(np.arange(1000, dtype=np.int32), 10_000).reshape(grid),
        starts[pick],
        sizes[pick],
    )
    meta = ArrayMeta(
        shape=(100_000, 100_000),
        chunks=(10, 100),
        dtype=np.dtype("<f4"),
        fill_value=float("nan"),
        codecs=({"id": "zlib", "level": 4},),
        dimension_names=("time", "x"),
    )
    group = RefGroup({}, {"data": RefArray(meta, manifest)})
    refzarr.write(group, json_path)
    refzarr.write(group, parquet_path)
    return json_path, parquet_path


# -- the table --------------------------------------------------------------------------------


def _rows(
    scenario: str, results: dict[str, dict[str, Any]], *, base: str, counts: bool = False
) -> list[list[str]]:
    rows = []
    reference = results.get(base, {}).get("seconds")
    for tool, found in results.items():
        if found.get("error"):
            rows.append([scenario, tool, "error: " + found["error"], "", "", "", ""])
            continue
        ratio = f"{found['seconds'] / reference:.2f}x {base}" if reference else ""
        over = f"{found['extra_mb'] / found['result_mb']:.2f}" if found.get("result_mb") else ""
        gets = f"{found['gets']:.0f}" if counts and "gets" in found else ""
        rows.append(
            [
                scenario,
                tool,
                f"{found['seconds']:.3f} s (cpu {found['cpu']:.2f} s)",
                ratio,
                f"{found['peak_mb']:.0f} MB",
                over,
                gets,
            ]
        )
    return rows


def _print(rows: list[list[str]]) -> None:
    header = ["scenario", "tool", "time", "vs", "peak", "extra/result", "GETs"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only", choices=["local", "s3", "first", "store", "sources"], action="append"
    )
    parser.add_argument("--mb", type=int, default=1024, help="size of the local variable")
    parser.add_argument("--steps", type=int, default=400, help="length of the store array")
    parser.add_argument("--files", type=int, default=1000, help="files of the sources set")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--generate-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate_first:
        _ten_million_references()
        return 0
    if args.worker:
        run_worker(*args.worker)
        return 0
    chosen = args.only or ["local", "s3", "first", "store", "sources"]
    print(f"bench_read: {os.cpu_count()} CPUs, repeat {args.repeat}, local {args.mb} MB")
    rows: list[list[str]] = []
    if "local" in chosen:
        rows += scenario_local(args.mb, args.repeat)
    if "s3" in chosen:
        rows += scenario_s3(args.repeat)
    if "first" in chosen:
        rows += scenario_first(args.repeat)
    if "store" in chosen:
        rows += scenario_store(args.steps, args.repeat)
    if "sources" in chosen:
        rows += scenario_sources(args.files, args.repeat)
    _print(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
