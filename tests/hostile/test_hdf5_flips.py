"""Damaged HDF5 structures at every header kind: bytes flipped inside the superblock (v0,
v2, v3), object headers (v1, v2, continuation chunks), B-trees (v1, v2 header, leaf),
local, global and fractal heaps (header, direct block), symbol table nodes, free-space and
fixed-array chunk indexes, and the messages that matter (dataspace, datatype, fill value,
layout, filter pipeline, attribute, link info, symbol table) of files the tests write.

Every scan must end, within a hard timeout, in a result (a flip HDF5 does not notice) or in
a refzarr error naming the file; never a foreign error, a crash or a hang. A flip inside a
checksummed structure refzarr reads itself (`CHECKSUMMED`) is always a `ScanError`. The scans run in
one child process (`childkit`: a crash in the HDF5 library must fail the test, not kill
pytest; a "started" line per file, so a crash or hang names the file that caused it). The
flips are drawn from a seeded generator, reproducible; ``REFZARR_HDF5_FLIPS`` (default 3)
sets how many per structure (a deeper run: ``REFZARR_HDF5_FLIPS=50``).
"""

from __future__ import annotations

import os
import random
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from childkit import Outcome, scan_in_child

FLIPS = int(os.environ.get("REFZARR_HDF5_FLIPS", "3"))
CHILD_TIMEOUT = 240.0
"""Seconds the child may take for every file (a few at most; more is a hang)."""

SIGNATURES = {
    b"HEAP": ("local heap", 32),
    b"GCOL": ("global heap", 64),
    b"FRHP": ("fractal heap header", 120),
    b"FHDB": ("fractal heap direct block", 64),
    b"SNOD": ("symbol table node", 64),
    b"TREE": ("v1 B-tree node", 64),
    b"BTHD": ("v2 B-tree header", 38),
    b"BTLF": ("v2 B-tree leaf", 64),
    b"OCHK": ("object header continuation", 64),
    b"FSHD": ("free-space manager", 64),
    b"FAHD": ("fixed array header", 28),
    b"FADB": ("fixed array data block", 64),
}
MESSAGES = {
    0x01: "dataspace message",
    0x02: "link info message",
    0x03: "datatype message",
    0x05: "fill value message",
    0x08: "layout message",
    0x0B: "filter pipeline message",
    0x0C: "attribute message",
    0x11: "symbol table message",
}
LIBVERS: dict[str, Any] = {"v0": "earliest", "v2": ("v108", "v108"), "v3": "latest"}
CHECKSUMMED = (
    "object header prefix",
    "object header continuation",
    "fractal heap header",
    "fractal heap direct block",
    "v2 B-tree header",
    "v2 B-tree leaf",
    *MESSAGES.values(),
)
"""Structures of the v2 and v3 files (version 2 object headers) that carry a checksum and
that refzarr reads itself (`ohdr.verify_checksum`): any flip there is a `ScanError`."""


def _write(path: Path, libver: Any) -> None:
    with h5py.File(path, "w", libver=libver) as f:
        f.attrs["title"] = "flips"
        f.attrs["names"] = ["a", "bb", "ccc"]
        data = np.arange(40 * 30, dtype="f4").reshape(40, 30)
        temp = f.create_dataset("temp", data=data, chunks=(4, 10), compression="gzip", shuffle=True)
        temp.attrs["units"] = "K"
        f.create_dataset("plain", data=np.arange(100, dtype="i8"))
        grow = np.arange(50, dtype="i2").reshape(5, 10)
        f.create_dataset("grow", data=grow, chunks=(2, 3), maxshape=(None, None))
        f.create_dataset("strings", data=np.array(["x", "yy", "zzz"], dtype=h5py.string_dtype()))
        g = f.create_group("g")
        for k in range(9):  # more than 8: dense link and attribute storage (fractal heaps)
            g.create_dataset(f"d{k}", data=np.arange(3) + k)
            g.attrs[f"a{k}"] = k


def _messages(data: bytes, address: int) -> Iterator[tuple[int, int, int]]:
    """(type, offset, size) of the messages of the object header at ``address`` (version 1:
    no signature; version 2: ``OHDR``), continuation blocks followed."""
    if data[address : address + 4] == b"OHDR":
        flags = data[address + 5]
        at = address + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        size = int.from_bytes(data[at : at + width], "little")
        head = 4 + (2 if flags & 0x04 else 0)
        yield from _chunk(data, at + width, at + width + size - 4, head, 1)
    else:
        size = struct.unpack_from("<I", data, address + 8)[0]
        yield from _chunk(data, address + 16, address + 16 + size, 8, 2)


def _chunk(data: bytes, at: int, end: int, head: int, width: int) -> Iterator[tuple[int, int, int]]:
    """The messages from ``at`` to ``end`` (a v1 message: type in 2 bytes, v2: in 1)."""
    while at + head <= end:
        kind = int.from_bytes(data[at : at + width], "little")
        length = struct.unpack_from("<H", data, at + width)[0]
        yield kind, at + head, length
        if kind == 0x10:  # continuation: (offset, length) of the next chunk
            offset, size = struct.unpack_from("<QQ", data, at + head)
            if data[offset : offset + 4] == b"OCHK":
                yield from _chunk(data, offset + 4, offset + size - 4, head, width)
            else:
                yield from _chunk(data, offset, offset + size, head, width)
        at += head + length


def structures(path: Path, version: str) -> dict[str, list[tuple[int, int]]]:
    """Every damageable structure of the file: name -> [(offset, length), ...]."""
    data = path.read_bytes()
    found: dict[str, list[tuple[int, int]]] = {
        f"superblock {version}": [(0, 96 if version == "v0" else 48)]
    }
    for signature, (name, length) in SIGNATURES.items():
        at = data.find(signature)
        while at >= 0:
            found.setdefault(name, []).append((at, min(length, len(data) - at)))
            at = data.find(signature, at + 1)
    with h5py.File(path, "r") as f:
        addresses = [h5py.h5o.get_info(f[name].id).addr for name in ("/", *f, "g/d0")]
        every = [h5py.h5o.get_info(f[name].id).addr for name in ("/", *_names(f))]
    blocks = dict(_continuations(data, every))  # continuation blocks: flips inside them only
    if "object header continuation" in found:
        chunks = found["object header continuation"]
        found["object header continuation"] = [(at, blocks.get(at, n)) for at, n in chunks]
    for address in addresses:
        prefix = 16 if data[address : address + 4] != b"OHDR" else 6
        found.setdefault("object header prefix", []).append((address, prefix))
        for kind, offset, length in _messages(data, address):
            if kind in MESSAGES and length:
                found.setdefault(MESSAGES[kind], []).append((offset, length))
    return found


def _names(f: h5py.File) -> list[str]:
    names: list[str] = []
    f.visit(names.append)
    return names


def _continuations(data: bytes, addresses: list[int]) -> Iterator[tuple[int, int]]:
    """(offset, length) of the continuation blocks of the object headers at ``addresses``."""
    for address in addresses:
        for kind, offset, _ in _messages(data, address):
            if kind == 0x10:
                yield struct.unpack_from("<QQ", data, offset)


def flipped(data: bytes, regions: list[tuple[int, int]], rng: random.Random) -> bytes:
    offset, length = rng.choice(regions)
    at = offset + rng.randrange(length)
    damaged = bytearray(data)
    damaged[at] ^= rng.randrange(1, 256)
    return bytes(damaged)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every flipped file, scanned in one child; its outcome by file name."""
    folder = tmp_path_factory.mktemp("flips")
    cases = []
    for version, libver in LIBVERS.items():
        healthy = folder / f"healthy-{version}.h5"
        _write(healthy, libver)
        cases.append({"id": healthy.name, "url": str(healthy)})
        data = healthy.read_bytes()
        for name, regions in sorted(structures(healthy, version).items()):
            rng = random.Random(f"{version} {name}")
            for k in range(FLIPS):
                path = folder / f"{version}-{name.replace(' ', '-')}-{k}.h5"
                path.write_bytes(flipped(data, regions, rng))
                cases.append({"id": path.name, "url": str(path)})
    healthy = folder / "healthy-v2.h5"
    data = bytearray(healthy.read_bytes())
    data[data.find(b"GCOL") + 24] = 0x3D  # object 1's size: HDF5 then loops forever
    (folder / "global-heap-object-size.h5").write_bytes(bytes(data))
    cases.append(
        {"id": "global-heap-object-size.h5", "url": str(folder / "global-heap-object-size.h5")}
    )
    started = time.monotonic()
    found = scan_in_child(cases, CHILD_TIMEOUT)
    return {
        "cases": [c["id"] for c in cases],
        "outcomes": found,
        "seconds": time.monotonic() - started,
    }


def test_every_structure_kind_is_damaged(tmp_path: Path) -> None:
    """The files hold every kind this module means to damage."""
    kinds: set[str] = set()
    for version, libver in LIBVERS.items():
        _write(tmp_path / f"{version}.h5", libver)
        kinds |= set(structures(tmp_path / f"{version}.h5", version))
    expected = {f"superblock {v}" for v in LIBVERS} | {n for n, _ in SIGNATURES.values()}
    expected |= set(MESSAGES.values()) | {"object header prefix"}
    assert expected <= kinds, expected - kinds


def test_no_flip_crashes_or_hangs_the_scan(outcomes: dict[str, Any]) -> None:
    found: dict[str, Outcome] = outcomes["outcomes"]
    unfinished = {k: o for k, o in found.items() if o.outcome not in ("result", "error")}
    assert not unfinished, list(unfinished.items())[:3]
    assert outcomes["seconds"] < CHILD_TIMEOUT


def test_every_failure_is_a_refzarr_error_naming_the_file(outcomes: dict[str, Any]) -> None:
    foreign = []
    for name, outcome in outcomes["outcomes"].items():
        if outcome.outcome != "error":
            continue
        if "RefzarrError" not in outcome.bases or name not in outcome.message:
            foreign.append((name, outcome.type, outcome.message[:200]))
    assert not foreign, foreign


def test_a_flip_in_a_checksummed_structure_is_a_scan_error(outcomes: dict[str, Any]) -> None:
    """Never a result, nor an `UnsupportedFeatureError` (skipped in silence by
    ``on_unsupported="skip"``): the checksum, or HDF5 opening the header, tells."""
    prefixes = tuple(f"{v}-{n.replace(' ', '-')}-" for v in ("v2", "v3") for n in CHECKSUMMED)
    cases = [case for case in outcomes["cases"] if case.startswith(prefixes)]
    wrong = []
    for case in cases:
        outcome = outcomes["outcomes"][case]
        if outcome.outcome != "error" or outcome.type != "ScanError":
            wrong.append((case, outcome.outcome, outcome.type, outcome.message[:200]))
    assert not wrong, wrong
    assert len(cases) >= 2 * (len(CHECKSUMMED) - 1) * FLIPS  # no symbol table message there


def test_the_healthy_files_scan(outcomes: dict[str, Any]) -> None:
    for version in LIBVERS:
        assert outcomes["outcomes"][f"healthy-{version}.h5"].outcome == "result"


def test_most_flips_are_noticed(outcomes: dict[str, Any]) -> None:
    """Not a bar (many bytes are names, reserved or unused), a sign the flips land."""
    found = list(outcomes["outcomes"].values())
    errors = sum(1 for o in found if o.outcome == "error")
    assert errors >= len(found) // 4, (errors, len(found))


def test_a_damaged_global_heap_object_size(outcomes: dict[str, Any]) -> None:
    """libhdf5 loops forever reading such a collection: checked before h5py reads it."""
    outcomes["outcomes"]["global-heap-object-size.h5"].assert_error(
        "ScanError", "dataset '/strings'", "damaged global heap collection at byte"
    )


@given(st.binary(min_size=16, max_size=256), st.integers(0, 255), st.integers(16, 300))
def test_the_global_heap_walk_never_raises(body: bytes, at: int, length: int) -> None:
    """Any bytes after a collection header: the walk says what is wrong, never raises."""
    from refzarr.scan.hdf5 import global_heap

    collection = b"GCOL\x01\x00\x00\x00" + struct.pack("<Q", 16 + len(body)) + body
    found = global_heap._objects(collection)
    assert isinstance(found, dict | str)
    data = collection + bytes(64)
    reader = global_heap._Reader(lambda o, n: data[o : o + n], min(len(data), length), None)
    reason = global_heap._damage(reader, 0, {1: at})
    assert isinstance(reason, str)
