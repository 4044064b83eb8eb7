"""Scanning DMR++ sidecars: refzarr's `DmrppScanner` against VirtualiZarr's `DMRPPParser`.

Two workloads, in one process, each tool warmed up once before the clock starts:

- the corpus's largest sidecar (``chunked_shufzip_fourD.h5.dmrpp``, 256 chunks) scanned
  ``--count`` times (default 1,000: one archive's worth of granules);
- a generated sidecar of 10^4 chunks (a float32 ``(100, 100, 100, 100)`` array in
  ``(10, 10, 10, 10)`` shuffle + deflate chunks), scanned ``--repeat`` times.

refzarr is called as ``DmrppScanner(inline_coordinates=0)(path)`` (the sidecar alone: the
corpus file has no coordinate, so this only skips a no-op); VirtualiZarr as
``DMRPPParser()(url, registry)`` with an obstore ``LocalStore`` in an ``ObjectStoreRegistry``,
its documented use. Times are wall-clock seconds per sidecar (median of rounds); the ratio is
VirtualiZarr's time over refzarr's.

Usage::

    python benchmarks/bench_dmrpp.py               # 1,000 corpus sidecars, 10 big ones
    python benchmarks/bench_dmrpp.py --count 100 --repeat 3
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "files" / "dmrpp"
LARGEST = CORPUS / "chunked_shufzip_fourD.h5.dmrpp"


def big_sidecar(folder: Path) -> Path:
    """A sidecar of 10^4 chunks (and no data file: neither tool reads one)."""
    head = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Dataset '
        'xmlns="http://xml.opendap.org/ns/DAP/4.0#" '
        'xmlns:dmrpp="http://xml.opendap.org/dap/dmrpp/1.0.0#" dapVersion="4.0" '
        'name="big.h5" dmrpp:href="data/big.h5" dmrpp:version="3.21.1">\n'
        '  <Float32 name="v"><Dim size="100"/><Dim size="100"/><Dim size="100"/>'
        '<Dim size="100"/>\n    <dmrpp:chunks compressionType="shuffle deflate" '
        'deflateLevel="4" fillValue="0" byteOrder="LE">\n'
        "      <dmrpp:chunkDimensionSizes>10 10 10 10</dmrpp:chunkDimensionSizes>\n"
    )
    lines = [head]
    for k, (i, j, m, n) in enumerate(itertools.product(range(0, 100, 10), repeat=4)):
        lines.append(
            f'      <dmrpp:chunk offset="{4096 + 3000 * k}" nBytes="3000" '
            f'chunkPositionInArray="[{i},{j},{m},{n}]"/>\n'
        )
    lines.append("    </dmrpp:chunks>\n  </Float32>\n</Dataset>\n")
    path = folder / "big.h5.dmrpp"
    path.write_text("".join(lines))
    return path


def refzarr_tool() -> Callable[[Path], Any]:
    from refzarr.scan.dmrpp import DmrppScanner

    scanner = DmrppScanner(inline_coordinates=0)
    return lambda path: scanner(str(path))


def virtualizarr_tool() -> Callable[[Path], Any]:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.parsers import DMRPPParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parser = DMRPPParser()
    return lambda path: parser(path.resolve().as_uri(), registry)


def per_file(tool: Callable[[Path], Any], path: Path, count: int, rounds: int = 3) -> float:
    tool(path)  # warm-up: imports, first-call caches
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(count):
            tool(path)
        times.append((time.perf_counter() - start) / count)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="corpus sidecars per round")
    parser.add_argument("--repeat", type=int, default=10, help="big sidecars per round")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # zarr's "numcodecs codecs are not in the v3 spec"
    tools = {"refzarr": refzarr_tool(), "virtualizarr": virtualizarr_tool()}
    with tempfile.TemporaryDirectory() as folder:
        cases = [(LARGEST, args.count), (big_sidecar(Path(folder)), args.repeat)]
        print(f"{'sidecar':<34} {'chunks':>7} {'refzarr s':>10} {'vz s':>10} {'vz/refzarr':>10}")
        for path, count in cases:
            ours, theirs = (per_file(tools[name], path, count) for name in tools)
            chunks = path.read_text().count("<dmrpp:chunk ")
            ratio = theirs / ours
            print(f"{path.name:<34} {chunks:>7} {ours:>10.5f} {theirs:>10.5f} {ratio:>9.1f}x")


if __name__ == "__main__":
    main()
