"""Variable-length values the global heap check did not reach before (session 10): files with
4- and 2-byte offsets and lengths, attributes of committed (named) datatypes, arrays of
variable-length strings, variable-length values inside compound or sequence types, attribute
messages in a shared message table, filters refzarr cannot decode.

Each file is written healthy and with object 1 of its first global heap collection damaged
(its size set to 0x3D: libhdf5 then loops forever reading it). The damaged ones are scanned in
one child process with a hard timeout (a hang fails the tests and names its file) and end in
a named refzarr error; the healthy ones give h5py's values, or the same refusal. Also: objects
with many attributes (dense storage over several heap blocks and B-tree levels, now read by
refzarr's header parser, so checked too), and bytes flipped in the structures these files
add (seeded; ``REFZARR_HDF5_FLIPS`` per structure, default 3).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from heapkit import damaged_heap_object
from hypothesis import given
from hypothesis import strategies as st

import refzarr
from childkit import Outcome, scan_in_child
from timebound import finish_within

CHILD_TIMEOUT = 120.0
"""Seconds the child may take for every file (a few at most; more is a hang)."""
SCAN_SECONDS = 60.0
"""Hard bound on one healthy scan in this process."""

STRINGS = np.array(["x", "yy", "zzz", "wwww"], dtype=h5py.string_dtype())
SIZES = {"o4l4": (4, 4), "o2l2": (2, 2), "o4l8": (4, 8), "o8l4": (8, 4)}
LIBVERS = {"v0": (h5py.h5f.LIBVER_EARLIEST, h5py.h5f.LIBVER_LATEST), "v2": (5, 5)}
NESTED = "variable-length values inside compound types or inside other variable-length types"
SHARED = "its attribute message is in the file's shared message table"


def _new_file(path: Path, fcpl: Any, libver: str) -> h5py.File:
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(*LIBVERS[libver])
    return h5py.File(h5py.h5f.create(str(path).encode(), h5py.h5f.ACC_TRUNC, fcpl, fapl))


def _sized(sizes: tuple[int, int]) -> Any:
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_sizes(*sizes)
    return fcpl


def _shared_attributes() -> Any:
    """A file creation property list putting attribute messages (and datatypes) in a shared
    message table (h5py has no call for it: libhdf5's own, through ctypes)."""
    folder = os.path.join(os.path.dirname(h5py.__file__), os.pardir, "h5py.libs")
    found = [p for p in glob.glob(os.path.join(folder, "libhdf5-*")) if "_hl" not in p]
    if not found:
        pytest.skip("h5py's libhdf5 not found (not a wheel install)")
    lib = ctypes.CDLL(found[0])
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    hid, flags = ctypes.c_int64(fcpl.id), (1 << 0x0C) | (1 << 0x03)  # attributes, datatypes
    assert lib.H5Pset_shared_mesg_nindexes(hid, ctypes.c_uint(1)) >= 0
    assert lib.H5Pset_shared_mesg_index(hid, 0, ctypes.c_uint(flags), ctypes.c_uint(1)) >= 0
    return fcpl


def _attribute(f: h5py.File) -> None:
    f.create_dataset("x", data=np.arange(4)).attrs["names"] = STRINGS


def _contiguous(f: h5py.File) -> None:
    f["s"] = STRINGS


def _chunked(f: h5py.File) -> None:
    f.create_dataset("s", data=STRINGS, chunks=(2,), shuffle=True, compression="gzip")


def _compact(f: h5py.File) -> None:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    kind = h5py.h5t.py_create(STRINGS.dtype, logical=True)
    h5py.h5d.create(f.id, b"s", kind, h5py.h5s.create_simple(STRINGS.shape), dcpl=dcpl)
    f["s"][...] = STRINGS


def _committed(f: h5py.File) -> None:
    f["text"] = h5py.string_dtype()
    f.create_dataset("x", data=np.arange(4)).attrs.create("names", STRINGS, dtype=f["text"])


def _array_of_strings(f: h5py.File) -> None:
    kind = np.dtype((h5py.string_dtype(), (2,)))
    f.create_dataset("x", data=np.arange(4)).attrs.create(
        "names", STRINGS.reshape(2, 2), shape=(2,), dtype=kind
    )


def _compound(f: h5py.File) -> None:
    kind = np.dtype([("n", "i4"), ("name", h5py.string_dtype())])
    values = np.array([(1, "ab"), (2, "cde")], dtype=kind)
    f.create_dataset("x", data=np.arange(4)).attrs["names"] = values


def _sequences_of_strings(f: h5py.File) -> None:
    kind = h5py.vlen_dtype(h5py.string_dtype())
    values = np.empty(2, dtype=object)
    values[:] = [STRINGS[:1], STRINGS[1:]]
    f.create_dataset("x", data=np.arange(4)).attrs.create("names", values, dtype=kind)


def _shared_dense(f: h5py.File) -> None:
    """Shared attribute messages in dense storage (more than 8 attributes)."""
    x = f.create_dataset("x", data=np.arange(4))
    x.attrs["names"] = STRINGS
    for k in range(12):
        x.attrs[f"count_{k}"] = np.int32(k)


def _unknown_filter(f: h5py.File) -> None:
    """ZFP (hdf5plugin) accepts variable-length strings; refzarr has no codec for it."""
    hdf5plugin = pytest.importorskip("hdf5plugin")
    f.create_dataset("s", data=STRINGS, chunks=(2,), **hdf5plugin.Zfp())


def _shared(f: h5py.File) -> None:
    x = f.create_dataset("x", data=np.arange(4))
    x.attrs["names"] = STRINGS
    x.attrs["count"] = np.int32(4)


Writer = Callable[[h5py.File], None]
FILES: dict[str, tuple[Writer, Callable[[], Any], str]] = {}
"""name -> (writer, file creation property list, library version bounds)."""
for _size, _pair in SIZES.items():
    for _kind, _write in {
        "attribute": _attribute,
        "contiguous": _contiguous,
        "chunked": _chunked,
        "compact": _compact,
    }.items():
        FILES[f"{_kind}-{_size}"] = (_write, lambda p=_pair: _sized(p), "v0")


def _default_creation() -> Any:
    return h5py.h5p.create(h5py.h5p.FILE_CREATE)


for _version in LIBVERS:
    for _kind, _write in {
        "committed": _committed,
        "array": _array_of_strings,
        "compound": _compound,
        "nested": _sequences_of_strings,
    }.items():
        FILES[f"{_kind}-{_version}"] = (_write, _default_creation, _version)
FILES["shared-v2"] = (_shared, _shared_attributes, "v2")
FILES["shared-dense-v2"] = (_shared_dense, _shared_attributes, "v2")
FILES["zfp-v0"] = (_unknown_filter, _default_creation, "v0")

CHECKED = [
    name for name in FILES if name.split("-")[0] not in ("compound", "nested", "shared", "zfp")
]
REFUSED = {
    "compound": NESTED,
    "nested": NESTED,
    "shared": SHARED,
    "zfp": "a filter refzarr cannot decode: filter H5Z-ZFP",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("heapgaps")
    for name, (write, fcpl, libver) in FILES.items():
        healthy = folder / f"{name}.h5"
        with _new_file(healthy, fcpl(), libver) as f:
            write(f)
        (folder / f"{name}-damaged.h5").write_bytes(damaged_heap_object(healthy.read_bytes()))
    return folder


@pytest.fixture(scope="module")
def outcomes(folder: Path) -> dict[str, Outcome]:
    cases = [{"id": p.name, "url": str(p)} for p in sorted(folder.glob("*.h5"))]
    return scan_in_child(cases, CHILD_TIMEOUT)


def _object(name: str) -> str:
    return "dataset '/x': attribute 'names'" if "-" in name and _is_attribute(name) else "'/s'"


def _is_attribute(name: str) -> bool:
    return name.split("-")[0] in ("attribute", "committed", "array", "compound", "nested", "shared")


@pytest.mark.parametrize("name", CHECKED)
def test_a_damaged_collection_is_named(outcomes: dict[str, Outcome], name: str) -> None:
    outcome = outcomes[f"{name}-damaged.h5"]
    outcome.assert_error("ScanError", f"{name}-damaged.h5", _object(name))
    assert "point into a damaged global heap collection at byte" in outcome.message


@pytest.mark.parametrize("name", [n for n in FILES if n not in CHECKED])
@pytest.mark.parametrize("state", ["", "-damaged"])
def test_values_that_cannot_be_checked_are_refused(
    outcomes: dict[str, Outcome], name: str, state: str
) -> None:
    outcome = outcomes[f"{name}{state}.h5"]
    reason = REFUSED[name.split("-")[0]]
    outcome.assert_error("UnsupportedFeatureError", f"{name}{state}.h5", _object(name), reason)


def _h5py_values(path: Path) -> dict[str, Any]:
    with h5py.File(path, "r") as f:
        if "s" in f:
            return {"s": f["s"].asstr()[()].tolist()}
        names = f["x"].attrs["names"]
        return {"names": np.char.decode(names.astype(bytes), "utf8").tolist()}


@pytest.mark.parametrize("name", CHECKED)
def test_the_healthy_files_give_h5py_values(folder: Path, name: str) -> None:
    path = folder / f"{name}.h5"
    expected = _h5py_values(path)
    group, error = finish_within(SCAN_SECONDS, lambda: refzarr.scan(str(path)))
    assert error is None, error
    if "s" in expected:
        with refzarr.open_dataset(group) as ds:
            assert ds["s"].values.tolist() == expected["s"]
    else:
        got = group.members["x"].meta.attributes["names"]
        assert json.loads(json.dumps(got)) == expected["names"]


def test_refused_attributes_are_skipped_and_the_rest_read(folder: Path) -> None:
    """``on_unsupported="skip"``: the refused attribute is listed, the others are read."""
    for name in ("shared-v2", "compound-v2", "nested-v0"):
        path = folder / f"{name}.h5"
        group, error = finish_within(
            SCAN_SECONDS, lambda p=path: refzarr.scan(str(p), on_unsupported="skip")
        )
        assert error is None, (name, error)
        assert [s.path for s in group.skipped] == ["/x@names"], name
        if name == "shared-v2":
            assert group.members["x"].meta.attributes["count"] == 4


# -- many attributes: dense storage larger than one B-tree leaf or one heap block ----------

DENSE = (20, 40, 400)
"""Attributes per object: one heap block holds about 16 such, one B-tree leaf about 29."""


def _dense_file(path: Path, count: int) -> None:
    """``count`` attributes of each kind on a dataset and the root group, two of them larger
    than a heap's largest managed object (4 KiB: stored as huge objects)."""
    with h5py.File(path, "w", libver="latest") as f:
        x = f.create_dataset("x", data=np.arange(4))
        x.attrs["history"] = np.bytes_(b"a long history; " * 400)
        f.attrs["weights"] = np.linspace(0, 1, 1000)
        for k in range(count):
            for obj in (x, f):
                obj.attrs[f"text_{k:04d}"] = f"value {k}" * (k % 3 + 1)
                obj.attrs[f"number_{k:04d}"] = np.int16(k)
                obj.attrs[f"real_{k:04d}"] = np.float64(k) / 3


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    folder = tmp_path_factory.mktemp("dense")
    cases = []
    for count in DENSE:
        healthy = folder / f"dense-{count}.h5"
        _dense_file(healthy, count)
        damaged = folder / f"dense-{count}-damaged.h5"
        damaged.write_bytes(damaged_heap_object(healthy.read_bytes()))
        cases += [{"id": p.name, "url": str(p)} for p in (healthy, damaged)]
    outcomes = scan_in_child(cases, CHILD_TIMEOUT)
    return {"folder": folder, **outcomes}  # type: ignore[dict-item]


@pytest.mark.parametrize("count", DENSE)
def test_dense_attributes_give_h5py_values(dense: dict[str, Any], count: int) -> None:
    path = dense["folder"] / f"dense-{count}.h5"
    group, error = finish_within(SCAN_SECONDS, lambda: refzarr.scan(str(path)))
    assert error is None, error
    with h5py.File(path, "r") as f:
        for got, obj in ((group.attributes, f), (group.members["x"].meta.attributes, f["x"])):
            expected = {name: obj.attrs[name] for name in obj.attrs}
            assert sorted(k for k in got if not k.startswith("_")) == sorted(expected)
            for name, value in expected.items():
                if isinstance(value, np.ndarray):  # the huge one
                    assert list(got[name]) == value.tolist(), name
                elif isinstance(value, bytes):
                    assert got[name] == value.decode(), name
                else:
                    assert got[name] == (value if isinstance(value, str) else value.item()), name


@pytest.mark.parametrize("count", DENSE)
def test_a_damaged_collection_of_dense_attributes_is_named(
    dense: dict[str, Any], count: int
) -> None:
    outcome = dense[f"dense-{count}-damaged.h5"]
    outcome.assert_error("ScanError", f"dense-{count}-damaged.h5", "attribute 'text_")
    assert "point into a damaged global heap collection at byte" in outcome.message


# -- bytes flipped in the structures these files add ---------------------------------------

FLIP_SIGNATURES = (b"BTHD", b"BTIN", b"BTLF", b"FRHP", b"FHIB", b"FHDB", b"GCOL", b"OHDR")
FLIPS_PER_STRUCTURE = int(os.environ.get("REFZARR_HDF5_FLIPS", "3"))


def _flipped(data: bytes, seed: int) -> Iterator[tuple[str, bytes]]:
    """Copies of ``data`` with one byte changed inside each kind of structure (the first
    64 bytes after each signature), drawn from a seeded generator."""
    draw = random.Random(seed)
    for signature in FLIP_SIGNATURES:
        starts = [m.start() for m in re.finditer(re.escape(signature), data)]
        for k in range(FLIPS_PER_STRUCTURE if starts else 0):
            at = draw.choice(starts) + draw.randrange(4, 64)
            if at < len(data):
                flipped = bytearray(data)
                flipped[at] ^= draw.randrange(1, 256)
                yield f"{signature.decode()}-{k}-{at}", bytes(flipped)


def test_flipped_bytes_end_in_a_result_or_a_named_error(folder: Path, tmp_path: Path) -> None:
    """Dense attributes of many objects, 4- and 2-byte sizes, a shared message table: every
    flip ends in a result or a refzarr error naming the file, never a hang or a foreign
    error."""
    dense_file = tmp_path / "dense-40.h5"
    _dense_file(dense_file, 40)
    sources = [dense_file] + [folder / f"{n}.h5" for n in ("attribute-o4l4", "chunked-o2l2")]
    sources.append(folder / "shared-dense-v2.h5")
    cases = []
    for number, source in enumerate(sources):
        for name, data in _flipped(source.read_bytes(), number):
            path = tmp_path / f"{source.stem}-{name}.h5"
            path.write_bytes(data)
            cases.append({"id": path.name, "url": str(path)})
    assert len(cases) >= 40
    for name, outcome in scan_in_child(cases, CHILD_TIMEOUT).items():
        assert outcome.outcome in ("result", "error"), (name, outcome)
        if outcome.outcome == "error":
            outcome.assert_error("RefzarrError", name)


@given(st.binary(min_size=16, max_size=256), st.sampled_from([2, 4, 8]), st.integers(0, 300))
def test_the_global_heap_walk_never_raises_whatever_the_length_size(
    body: bytes, length_size: int, at: int
) -> None:
    """Any bytes after a collection header with 2-, 4- or 8-byte lengths: the walk says what
    is wrong, never raises."""
    from refzarr.scan.hdf5 import global_heap

    size = (16 + len(body)).to_bytes(length_size, "little").ljust(8, b"\0")
    collection = b"GCOL\x01\x00\x00\x00" + size + body
    assert isinstance(global_heap._objects(collection, length_size), dict | str)
    data = collection + bytes(64)
    reader = global_heap._Reader(lambda o, n: data[o : o + n], min(len(data), at), None)
    reason = global_heap._damage(reader, 0, {1: 1}, length_size)
    assert isinstance(reason, str)
