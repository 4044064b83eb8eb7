"""Writing virtual references into Icechunk: refzarr against VirtualiZarr and the bulk API.

One float32 array of N chunk references spread over 1,000 file URLs (``file:///data/f0000.nc``
...; the files need not exist: nothing is read) is written into a fresh local Icechunk
repository and committed, three ways:

- ``refzarr``: ``refzarr.to_icechunk(group, session.store)`` of an in-memory `RefGroup`;
- ``virtualizarr``: ``vds.vz.to_icechunk(session.store)`` of a Dataset holding one
  ``ManifestArray`` built from the same columns (``ChunkManifest.from_arrays``);
- ``bulk``: Icechunk's own bulk call, ``store.set_virtual_refs(path, specs)`` after zarr
  creates the array: the list of ``VirtualChunkSpec`` is built before the clock starts, so
  this is the floor any writer built on Icechunk 1.x can reach;
- ``bulk-arr`` (Icechunk 2.x only): its column-wise call, ``store.set_virtual_refs_arr(path,
  grid, locations, offsets, lengths)``, the columns built before the clock starts: the floor
  on 2.x (refzarr and VirtualiZarr 2.8 both write through it there).

Each measurement runs in a fresh process (its own peak memory, ``ru_maxrss``); the clock covers
the write and the commit. Medians of ``--repeat`` runs.

Usage::

    python benchmarks/bench_icechunk.py                  # 1M references, as issue 18 asks
    python benchmarks/bench_icechunk.py --sizes 100k --repeat 1
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

NFILES = 1_000
CHUNK = 1_000  # float32 values per chunk
TOOLS = ("bulk", "bulk-arr", "refzarr", "virtualizarr")
SUFFIXES = {"k": 1_000, "M": 1_000_000}


def parse_size(text: str) -> int:
    """``"100k"`` -> 100,000, ``"1M"`` -> 1,000,000."""
    text = text.strip()
    scale = SUFFIXES.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in SUFFIXES else text) * scale)


def columns(n: int) -> tuple[list[str], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray]:
    """The URL table, each chunk's URL index, offset and length (chunks of a file together)."""
    urls = [f"file:///data/f{k:04d}.nc" for k in range(NFILES)]
    ids = (np.arange(n) * NFILES // n).astype(np.int32)
    offsets = (np.arange(n, dtype=np.uint64) % (n // NFILES)) * 4096 + 2048
    lengths = np.full(n, 4000, dtype=np.uint64)
    return urls, ids, offsets, lengths


def repository(folder: Path) -> Any:
    """A fresh local repository whose virtual chunk container serves ``file:///data/``."""
    import icechunk

    config = icechunk.RepositoryConfig.default()
    container = icechunk.VirtualChunkContainer(
        "file:///data/", icechunk.local_filesystem_store("/data")
    )
    config.set_virtual_chunk_container(container)
    return icechunk.Repository.create(icechunk.local_filesystem_storage(str(folder)), config)


def write_refzarr(store: Any, n: int) -> None:
    import refzarr
    from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup

    urls, ids, offsets, lengths = columns(n)
    manifest = ChunkManifest.from_arrays(urls, ids, offsets, lengths)
    meta = ArrayMeta(
        shape=(n * CHUNK,),
        chunks=(CHUNK,),
        dtype=np.dtype("<f4"),
        codecs=(),
        dimension_names=("x",),
    )
    group = RefGroup({}, {"data": RefArray(meta, manifest)})
    START()
    refzarr.to_icechunk(group, store)


def write_virtualizarr(store: Any, n: int) -> None:
    import xarray as xr
    from virtualizarr.manifests import ChunkManifest, ManifestArray
    from virtualizarr.manifests.utils import create_v3_array_metadata

    urls, ids, offsets, lengths = columns(n)
    paths = np.asarray(urls, dtype=np.dtypes.StringDType())[ids]
    manifest = ChunkManifest.from_arrays(paths=paths, offsets=offsets, lengths=lengths)
    meta = create_v3_array_metadata(
        shape=(n * CHUNK,),
        data_type=np.dtype("<f4"),
        chunk_shape=(CHUNK,),
        fill_value=None,
        dimension_names=("x",),
    )
    vds = xr.Dataset({"data": xr.Variable(("x",), ManifestArray(meta, manifest))})
    START()
    vds.vz.to_icechunk(store)


def write_bulk(store: Any, n: int) -> None:
    import zarr
    from icechunk import VirtualChunkSpec

    urls, ids, offsets, lengths = columns(n)
    specs = [
        VirtualChunkSpec([k], urls[i], o, length)
        for k, (i, o, length) in enumerate(
            zip(ids.tolist(), offsets.tolist(), lengths.tolist(), strict=True)
        )
    ]
    START()
    root = zarr.open_group(store, mode="w")
    root.create_array(
        "data", shape=(n * CHUNK,), chunks=(CHUNK,), dtype="<f4", dimension_names=("x",)
    )
    store.set_virtual_refs("data", specs, validate_containers=True)


def write_bulk_arr(store: Any, n: int) -> None:
    import zarr

    urls, ids, offsets, lengths = columns(n)
    locations = np.asarray(urls, dtype=object)[ids].tolist()
    START()
    root = zarr.open_group(store, mode="w")
    root.create_array(
        "data", shape=(n * CHUNK,), chunks=(CHUNK,), dtype="<f4", dimension_names=("x",)
    )
    store.set_virtual_refs_arr("data", (n,), locations, offsets, lengths)


def has_columns() -> bool:
    """Whether the installed Icechunk has the column-wise ``set_virtual_refs_arr`` (2.x)."""
    import icechunk

    return hasattr(icechunk.IcechunkStore, "set_virtual_refs_arr")


WRITERS = {
    "bulk": write_bulk,
    "bulk-arr": write_bulk_arr,
    "refzarr": write_refzarr,
    "virtualizarr": write_virtualizarr,
}
_CLOCK: list[float] = []


def START() -> None:  # the clock starts here, after the preparation
    _CLOCK.append(time.perf_counter())


def run_worker(tool: str, n: int) -> None:
    """One measurement; prints JSON: seconds (write + commit) and peak MB."""
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as folder:
        repo = repository(Path(folder) / "repo")
        session = repo.writable_session("main")
        WRITERS[tool](session.store, n)
        session.commit(f"{tool}: {n} references")
        seconds = time.perf_counter() - _CLOCK[-1]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak}))


def measure_once(tool: str, n: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", tool, "--n", str(n)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(tools: list[str], n: int, repeat: int) -> dict[str, tuple[float, float]]:
    """Median seconds and peak MB of each tool; the tools take turns in every round, so a
    machine load that drifts during the runs weighs on all of them alike."""
    runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in tools}
    for _ in range(repeat):
        for tool in tools:
            runs[tool].append(measure_once(tool, n))
    return {
        tool: (statistics.median(r["seconds"] for r in rs), max(r["peak_mb"] for r in rs))
        for tool, rs in runs.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M", help="references, e.g. 100k,1M")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args.worker, args.n)
        return 0
    tools = [t for t in TOOLS if t in args.tools.split(",")]
    if not has_columns():
        tools = [t for t in tools if t != "bulk-arr"]
    names = ("icechunk", "zarr", "virtualizarr")
    print(", ".join(f"{name} {version(name)}" for name in names) + f"; median of {args.repeat}")
    print(f"{'refs':>9} {'tool':<13} {'seconds':>8} {'x bulk':>7} {'x arr':>6} {'peak MB':>8}")
    for n in (parse_size(s) for s in args.sizes.split(",")):
        results = measure(tools, n, args.repeat)
        floor = results.get("bulk", (float("nan"), 0))[0]
        arr = results.get("bulk-arr", (float("nan"), 0))[0]
        for tool, (seconds, peak) in results.items():
            ratios = f"{seconds / floor:>7.2f} {seconds / arr:>6.2f}"
            print(f"{n:>9,} {tool:<13} {seconds:>8.3f} {ratios} {peak:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
