"""Groups' links read from the file: link messages in the header or in dense storage.

New-style groups (``libver="latest"``, ``track_order=True``, every netCDF4 group) keep their
links in link messages, in a fractal heap indexed by v2 B-trees once there are more than 8.
h5py listed them (and HDF5 looked each name up three times); now refzarr reads them, in
h5py's order (creation order when tracked, else by name). Compared with h5py on files of 1
to 5,000 members of every kind of link, nested dense groups, and every corpus group.
A group that many links name is built once; a soft link to an object whose header is
damaged is a ScanError, not a dangling link.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import h5py
import numpy as np
import pytest
from h5kit import corpus_h5_files, roundtrip
from numcodecs.jenkins import jenkins_lookup3

import refzarr
from refzarr import RefGroup
from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan import ScannedGroup
from refzarr.scan.hdf5 import scanner as hdf5_scanner
from refzarr.scan.hdf5.group_links import EXTERNAL, HARD, SOFT, Link
from refzarr.scan.hdf5.headers import ObjectHeaders
from refzarr.scan.hdf5.ohdr import objno_address

SIZES = (1, 9, 100, 5_000)
"""Members of the group ``/g``: compact links (1), just past compact (9), dense (100, 5,000)."""


def _mixed(n: int, track: bool) -> Callable[[h5py.File], None]:
    """``/g`` of ``n`` links of every kind (datasets, hard and soft links to a dataset, soft
    links to a group, external links to a dataset and a group, dense subgroups), named so
    that creation order is not name order."""

    def write(f: h5py.File) -> None:
        base = f.create_dataset("base", data=np.arange(4.0), chunks=(2,))
        sub = f.create_group("sub", track_order=track)
        sub.create_dataset("inner", data=np.arange(6, dtype="i2"))
        g = f.create_group("g", track_order=track)
        for i in range(n):
            _add(g, f"z{n - i}_{i % 6}", i, base, track)
        g["ümlaut"] = h5py.SoftLink("/base")  # sorted by its UTF-8 bytes

    return write


def _add(g: h5py.Group, name: str, i: int, base: h5py.Dataset, track: bool) -> None:
    kind = i % 6
    if kind == 0:
        g.create_dataset(name, data=np.full(3, i))
    elif kind == 1:
        g[name] = base
    elif kind == 2:
        g[name] = h5py.SoftLink("/base")
    elif kind == 3:
        g[name] = h5py.SoftLink("/sub")
    elif kind == 4:
        g[name] = h5py.ExternalLink("target.h5", "/tg" if i % 12 == 4 else "/t")
    else:
        nested = g.create_group(name, track_order=track)
        for j in range(12):
            nested.create_dataset(f"q{12 - j}", data=np.arange(j + 1))


def _many(n: int, track: bool) -> Callable[[h5py.File], None]:
    """``/g`` of ``n`` hard links to one dataset and every tenth a soft link (cheap to scan:
    one object)."""

    def write(f: h5py.File) -> None:
        x = f.create_dataset("x", data=np.arange(3))
        g = f.create_group("g", track_order=track)
        for i in range(n):
            name = f"m{(i * 7919) % n:05d}"
            g[name] = h5py.SoftLink("/x") if i % 10 == 0 else x

    return write


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("links")
    with h5py.File(folder / "target.h5", "w", libver="latest") as f:
        f.create_dataset("t", data=np.arange(5.0))
        f.create_group("tg").create_dataset("u", data=np.arange(3))
    out = {}
    for track in (False, True):
        for n in SIZES:
            fill = _many(n, track) if n > 100 else _mixed(n, track)
            path = folder / f"g{n}{'t' if track else ''}.h5"
            with h5py.File(path, "w", libver="latest", track_order=track) as f:
                fill(f)
            out[path.stem] = path
    return out


def _headers(f: h5py.File) -> ObjectHeaders:
    data = Path(f.filename).read_bytes()
    return ObjectHeaders(f, lambda position, length: data[position : position + length], len(data))


def _groups(f: h5py.File) -> Iterator[h5py.Group]:
    """Every group of ``f`` reached by hard links."""
    yield f
    found: list[str] = []
    f.visit_links(lambda name: found.append(name))
    for name in found:
        if isinstance(f.get(name, getlink=True), h5py.HardLink):
            item = f[name]
            if isinstance(item, h5py.Group):
                yield item


def _assert_as_h5py(group: h5py.Group, links: list[Link]) -> None:
    """``links`` are the links h5py lists for ``group``: names, order, kinds and targets."""
    assert [link.name for link in links] == list(group), group.name
    for link in links:
        found = group.get(link.name, getlink=True)
        if link.kind == HARD:
            assert isinstance(found, h5py.HardLink), link
            info = h5py.h5g.get_objinfo(group.id, link.name.encode(), follow_link=False)
            assert link.value == objno_address(info.objno), link
        elif link.kind == SOFT:
            assert isinstance(found, h5py.SoftLink), link
            assert found.path == link.value, link
        else:
            assert link.kind == EXTERNAL, link
            assert isinstance(found, h5py.ExternalLink), link
            assert (found.filename, found.path) == link.value, link


@pytest.mark.parametrize("track", [False, True], ids=["by-name", "tracked"])
@pytest.mark.parametrize("n", SIZES)
def test_links_are_those_h5py_lists(files: dict[str, Path], n: int, track: bool) -> None:
    with h5py.File(files[f"g{n}{'t' if track else ''}"], "r") as f:
        headers = _headers(f)
        for group in _groups(f):
            links = headers.links(group.id)
            assert links is not None, group.name  # a new-style group: read here
            _assert_as_h5py(group, links)
        assert len(f["g"]) == n + (n <= 100)


def test_every_corpus_group_with_link_info_is_read_as_h5py() -> None:
    read = 0
    for f in corpus_h5_files():
        headers = _headers(f)
        for group in _groups(f):
            links = headers.links(group.id)
            if links is not None:
                _assert_as_h5py(group, links)
                read += 1
    assert read >= 20  # netCDF4 files' groups (the old-format ones are listed by h5py)


def test_old_format_groups_are_left_to_h5py(tmp_path: Path) -> None:
    path = tmp_path / "old.h5"
    _write(path, _many(12, False), libver="earliest")  # (an external link needs new style)
    with h5py.File(path, "r") as f:
        assert _headers(f).links(f["g"].id) is None  # a symbol table


def _write(path: Path, fill: Callable[[h5py.File], None], **kwargs: Any) -> Path:
    with h5py.File(path, "w", **kwargs) as f:
        fill(f)
    return path


@pytest.mark.parametrize("track", [False, True], ids=["by-name", "tracked"])
def test_scan_lists_new_style_groups_without_h5py(
    files: dict[str, Path], track: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Members in h5py's order, h5py never asked to list a group (nor HDF5 to look up a
    member's link)."""
    path = files[f"g100{'t' if track else ''}"]
    with h5py.File(path, "r") as f:
        expected = {group.name: list(group) for group in _groups(f)}

    def refused(*args: Any) -> Any:
        raise AssertionError("listed by h5py")

    monkeypatch.setattr(h5py.Group, "__iter__", refused)
    monkeypatch.setattr(hdf5_scanner, "_is_external", refused)
    group = refzarr.scan(str(path))
    for name, members in expected.items():
        found = group if name == "/" else group[name]
        assert isinstance(found, RefGroup)
        assert list(found.members) == members, name  # every link a member, in order


@pytest.mark.parametrize("track", [False, True], ids=["by-name", "tracked"])
def test_every_link_reads_what_h5py_reads(
    files: dict[str, Path], tmp_path: Path, track: bool
) -> None:
    group = roundtrip(files[f"g9{'t' if track else ''}"], tmp_path)
    assert group["g/z8_1"] is group["base"]  # a hard link: one array
    assert group["g/ümlaut"] is group["base"]  # a soft link too


@pytest.mark.parametrize("track", [False, True], ids=["by-name", "tracked"])
def test_five_thousand_members_in_h5py_order(files: dict[str, Path], track: bool) -> None:
    path = files[f"g5000{'t' if track else ''}"]
    group = refzarr.scan(str(path))
    with h5py.File(path, "r") as f:
        names = list(f["g"])
    g = group["g"]
    assert isinstance(g, RefGroup)
    assert list(g.members) == names
    assert all(member is group["x"] for member in g.members.values())


def test_links_of_a_remote_file_are_read_through_fsspec(files: dict[str, Path]) -> None:
    """The same members and arrays (referencing the URL) from ``memory://``, external links
    found next to the file there."""
    memory = fsspec.filesystem("memory")
    for name in ("g100t.h5", "target.h5"):
        memory.pipe(f"/dense-links/{name}", (files["g100t"].parent / name).read_bytes())
    try:
        remote = refzarr.scan("memory://dense-links/g100t.h5")
    finally:
        memory.rm("/dense-links", recursive=True)
    local = refzarr.scan(str(files["g100t"]))
    assert [path for path, _ in remote.groups()] == [path for path, _ in local.groups()]
    assert [path for path, _ in remote.arrays()] == [path for path, _ in local.arrays()]
    for path, arr in local.arrays():
        other = remote[path]
        assert isinstance(other, refzarr.RefArray)
        assert other.meta == arr.meta, path
        np.testing.assert_array_equal(other.manifest.offset, arr.manifest.offset)


# Damaged link storage: named ScanErrors


def _at(data: bytes, signature: bytes, kind: int | None = None) -> int:
    """Where the only structure with ``signature`` (and B-tree ``kind``) starts."""
    found = [
        m.start()
        for m in re.finditer(re.escape(signature), data)
        if kind is None or data[m.start() + 5] == kind
    ]
    assert len(found) == 1, (signature, found)
    return found[0]


def _no_heap_signature(data: bytearray) -> str:
    at = _at(data, b"FRHP")
    data[at : at + 4] = b"XXXX"
    return "no fractal heap header at address"


def _flipped_link(data: bytearray) -> str:
    at = data.find(b"FHDB")  # the first of the heap's direct blocks
    data[at + 40] ^= 0x01  # inside a link message: the block fails its checksum
    return "direct block at address .* fails its checksum"


def _no_name_index(data: bytearray) -> str:
    at = _at(data, b"BTHD\x00\x05")
    data[at : at + 4] = b"XXXX"
    return "no B-tree header signature at address"


def _no_order_leaf(data: bytearray) -> str:
    at = _at(data, b"BTLF\x00\x06")
    data[at : at + 4] = b"XXXX"
    return "no B-tree node of type 6 at address"


def _order_mislisted(data: bytearray) -> str:
    """The creation order index's first record says another creation order (resealed: the
    damage is found by comparing it with the link's own)."""
    at = _at(data, b"BTLF\x00\x06")
    data[at + 6] ^= 0x10
    end = next(e for e in range(at + 7, len(data) - 4) if _sealed(data, at, e, flip=0x10))
    data[end : end + 4] = jenkins_lookup3(bytes(data[at:end]), 0).to_bytes(4, "little")
    return "of creation order 0 listed as 16 by the creation order index"


def _sealed(data: bytearray, at: int, end: int, flip: int) -> bool:
    """Whether ``end`` is where the leaf at ``at`` kept its checksum before byte 6 was
    flipped by ``flip``."""
    original = bytearray(data[at:end])
    original[6] ^= flip
    return jenkins_lookup3(bytes(original), 0) == int.from_bytes(data[end : end + 4], "little")


@pytest.mark.parametrize(
    "damage", [_no_heap_signature, _flipped_link, _no_name_index, _no_order_leaf, _order_mislisted]
)
def test_damaged_link_storage_is_a_named_scan_error(
    tmp_path: Path, damage: Callable[[bytearray], str]
) -> None:
    """One dense group whose creation order is indexed (two B-trees of one leaf each, one
    heap)."""
    source = _write(tmp_path / "good.h5", _many(20, True), libver="latest")
    data = bytearray(source.read_bytes())
    what = damage(data)
    path = tmp_path / "damaged.h5"
    path.write_bytes(bytes(data))
    match = rf"{re.escape(str(path))}: object '/g': .*{what}"
    with pytest.raises(ScanError, match=match):
        refzarr.scan(str(path), on_unsupported="skip")


# A group many links name is built once


def _linked_groups(f: h5py.File) -> None:
    target = f.create_group("target")
    for i in range(20):
        target.create_dataset(f"d{i}", data=np.arange(i + 1))
    target.create_group("inner").create_dataset("z", data=np.arange(3))
    for i in range(30):
        f[f"link{i}"] = h5py.SoftLink("/target")
    f["hard2"] = target


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_a_group_many_links_name_is_built_once(
    tmp_path: Path, libver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "linked.h5", _linked_groups, libver=libver)
    built: list[str] = []
    real = hdf5_scanner._Walk.group

    def counting(self: Any, group: h5py.Group, *args: Any) -> RefGroup:
        built.append(group.name)
        return real(self, group, *args)

    monkeypatch.setattr(hdf5_scanner._Walk, "group", counting)
    group = roundtrip(path, tmp_path)
    assert sorted(built) == ["/", "/hard2", "/hard2/inner"]  # h5py names it by its first link
    for i in range(30):
        assert group[f"link{i}"] is group["target"] is group["hard2"]


def _cycles(f: h5py.File) -> None:
    a, b = f.create_group("a"), f.create_group("b")
    a.create_dataset("ad", data=np.arange(3))
    b.create_dataset("bd", data=np.arange(2))
    a["lb"], b["up"] = h5py.SoftLink("/b"), h5py.SoftLink("/a")
    e = f.create_group("e")
    e.create_dataset("ed", data=np.arange(1))
    for i in range(3):
        f[f"s{i}"] = h5py.SoftLink("/e")


def test_groups_on_a_cycle_hold_what_their_place_gives(tmp_path: Path) -> None:
    """A group on a cycle of links is built again at each place (what it holds depends on
    which groups are above it there); one off any cycle is built once."""
    path = _write(tmp_path / "cycles.h5", _cycles, libver="latest")
    group = refzarr.scan(str(path), on_unsupported="skip")
    assert isinstance(group, ScannedGroup)
    assert sorted(s.path for s in group.skipped) == ["/a/lb/up", "/b/up/lb"]
    assert list(_members(group, "a/lb")) == ["bd"]
    assert list(_members(group, "b/up")) == ["ad"]
    assert list(_members(group, "a")) == ["ad", "lb"]
    assert group["s0"] is group["s2"] is group["e"]
    with pytest.raises(UnsupportedFeatureError, match="'/a/lb/up': links back to its parent"):
        refzarr.scan(str(path))


def _members(group: RefGroup, path: str) -> dict[str, Any]:
    found = group[path]
    assert isinstance(found, RefGroup)
    return dict(found.members)


# Soft links: damaged targets are no dangling links


def _soft_links(f: h5py.File) -> None:
    """Soft links created (and, creation order tracked, scanned) before their targets: a
    damaged target's own hard link is not met first."""
    f["to_d"] = h5py.SoftLink("/d")
    f["to_gx"] = h5py.SoftLink("/g/x")
    f["to_dx"] = h5py.SoftLink("/d/x")
    f.create_dataset("d", data=np.arange(3))
    f.create_group("g").create_dataset("x", data=np.arange(2))


def _damage_header(path: Path, name: str) -> None:
    """Give the object header of ``name`` a version HDF5 does not know."""
    with h5py.File(path, "r") as f:
        address = h5py.h5o.get_info(f[name].id).addr
    data = bytearray(path.read_bytes())
    assert data[address : address + 5] == b"OHDR\x02"
    data[address + 4] = 7
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damaged", "link", "target"),
    [("d", "to_d", "/d"), ("g", "to_gx", "/g/x"), ("d", "to_dx", "/d/x")],
    ids=["target", "group-on-the-way", "dataset-on-the-way"],
)
def test_a_soft_link_to_a_damaged_object_is_a_scan_error(
    tmp_path: Path, damaged: str, link: str, target: str
) -> None:
    """Not a dangling link (left out in silence by ``on_unsupported="skip"``): the object is
    there, HDF5 cannot read it."""
    path = _write(tmp_path / "soft.h5", _soft_links, libver="latest", track_order=True)
    _damage_header(path, damaged)
    with h5py.File(path, "r") as f:
        assert next(iter(f)) == "to_d"  # scanned first
    del_others = [name for name in ("to_d", "to_gx", "to_dx") if name != link]
    with h5py.File(path, "r+") as f:
        for name in del_others:
            del f[name]
    message = rf"link '/{link}': soft link to '{re.escape(target)}': the object it names is there"
    with pytest.raises(ScanError, match=message):
        refzarr.scan(str(path), on_unsupported="skip")


def _dangling(f: h5py.File) -> None:
    f.create_dataset("d", data=np.arange(3))
    f["absent"] = h5py.SoftLink("/nowhere")
    f["absent_on_the_way"] = h5py.SoftLink("/nope/x")
    f["chain"] = h5py.SoftLink("/absent")
    f["under_a_dataset"] = h5py.SoftLink("/d/x")
    f["to_missing_file"] = h5py.ExternalLink("nofile.h5", "/x")
    f["through_missing_file"] = h5py.SoftLink("/to_missing_file/y")


def test_dangling_soft_links_stay_unsupported(tmp_path: Path) -> None:
    path = _write(tmp_path / "dangling.h5", _dangling, libver="latest")
    group = refzarr.scan(str(path), on_unsupported="skip")
    assert isinstance(group, ScannedGroup)
    reasons = {s.path: s.reason for s in group.skipped}
    assert sorted(reasons) == [
        "/absent",
        "/absent_on_the_way",
        "/chain",
        "/through_missing_file",
        "/to_missing_file",
        "/under_a_dataset",
    ]
    for name in ("absent", "absent_on_the_way", "chain", "under_a_dataset"):
        assert reasons[f"/{name}"].endswith(f"link '/{name}': dangling soft link")
