"""The allow-list judges a URL exactly as the filesystem that opens it resolves it: every
spelling of a local path, ``~``, ``..``, symbolic links, protocol aliases, chained URLs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import refzarr
from refzarr import ArrayMeta, ChunkManifest, ForbiddenURLError, RefArray, RefGroup
from refzarr.io import RangeReader, URLPolicy


@pytest.fixture
def allowed_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An allowed folder holding ``inside.bin``, which is also the working directory."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "inside.bin").write_bytes(bytes(range(16)))
    (tmp_path / "outside.bin").write_bytes(b"secret" * 4)
    monkeypatch.chdir(allowed)
    return allowed


def _policy(allowed: Path) -> URLPolicy:
    return URLPolicy([allowed.as_uri() + "/"])


@pytest.mark.parametrize(
    "spelling",
    [
        "file:{outside}",
        "local:{outside}",
        "file://{outside}",
        "local://{outside}",
        "../outside.bin",
        "./../outside.bin",
        "local://../outside.bin",
        "file://{allowed}/../outside.bin",
        "{allowed}/sub/../../outside.bin",
    ],
)
def test_local_spellings_outside_are_refused(allowed_dir: Path, spelling: str) -> None:
    outside = allowed_dir.parent / "outside.bin"
    url = spelling.format(outside=outside, allowed=allowed_dir)
    with pytest.raises(ForbiddenURLError, match="may only read from"):
        _policy(allowed_dir).check([url])


@pytest.mark.parametrize(
    "spelling",
    ["inside.bin", "./inside.bin", "file:{allowed}/inside.bin", "local://{allowed}/inside.bin"],
)
def test_local_spellings_inside_are_allowed(allowed_dir: Path, spelling: str) -> None:
    _policy(allowed_dir).check([spelling.format(allowed=allowed_dir)])


def test_home_is_judged_as_fsspec_expands_it(
    allowed_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for url in ("~/x.bin", "file://~/x.bin"):
        with pytest.raises(ForbiddenURLError):
            _policy(allowed_dir).check([url])
    URLPolicy([home.as_uri() + "/"]).check(["~/x.bin"])


def test_symbolic_links_are_followed(allowed_dir: Path) -> None:
    (allowed_dir / "escape.bin").symlink_to(allowed_dir.parent / "outside.bin")
    (allowed_dir / "door").symlink_to(allowed_dir.parent)
    (allowed_dir / "alias.bin").symlink_to(allowed_dir / "inside.bin")
    for url in ("escape.bin", f"{allowed_dir}/door/outside.bin"):
        with pytest.raises(ForbiddenURLError):
            _policy(allowed_dir).check([url])
    _policy(allowed_dir).check(["alias.bin"])


def test_an_allowed_prefix_through_a_link_admits_the_real_folder(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    URLPolicy([(tmp_path / "link").as_uri() + "/"]).check([str(real / "a.nc")])


def test_protocol_aliases_and_normalised_object_paths() -> None:
    policy = URLPolicy(["s3://bucket/data/"])
    policy.check(["s3://bucket/data/a.nc", "s3a://bucket/data/a.nc"])
    for url in ("s3://bucket/data/../private/a.nc", "s3://bucket/database.nc", "gs://bucket/x"):
        with pytest.raises(ForbiddenURLError):
            policy.check([url])
    URLPolicy(["s3"]).check(["s3a://any/thing"])
    URLPolicy(["local"]).check(["file:///x", "/x", "x"])


def test_http_paths_are_normalised() -> None:
    policy = URLPolicy(["https://host.example/data/"])
    policy.check(["https://HOST.example/data/a.nc"])
    for url in ("https://host.example/data/../admin", "https://host.example/data/%2e%2e/admin"):
        with pytest.raises(ForbiddenURLError):
            policy.check([url])


@pytest.mark.parametrize(
    "url", ["simplecache::file:///x", "zip://a::file:///x.zip", "nosuchproto://x/y"]
)
def test_what_cannot_be_judged_is_refused(url: str) -> None:
    with pytest.raises(ForbiddenURLError, match=r"chained|cannot judge|not one refzarr can judge"):
        URLPolicy(["file", "s3"]).check([url])


def test_no_allow_list_allows_everything() -> None:
    URLPolicy(None).check(["simplecache::file:///x", "nosuchproto://x"])


def _one_chunk_group(url: str) -> RefGroup:
    manifest = ChunkManifest.from_arrays([url], np.array([0]), np.array([0]), np.array([4]))
    meta = ArrayMeta(shape=(4,), chunks=(4,), dtype=np.dtype("u1"), dimension_names=("x",))
    return RefGroup(members={"v": RefArray(meta, manifest)})


def test_a_stranger_reference_set_cannot_read_outside(allowed_dir: Path) -> None:
    outside = allowed_dir.parent / "outside.bin"
    allowed = [allowed_dir.as_uri() + "/"]
    for url in (f"file:{outside}", f"local:{outside}", "../outside.bin"):
        path = allowed_dir / "refs.json"
        refzarr.write(_one_chunk_group(url), path)
        with pytest.raises(ForbiddenURLError):
            refzarr.open_dataset(path, allowed_protocols=allowed)["v"].values  # noqa: B018
        with pytest.raises(ForbiddenURLError):
            RangeReader(allowed=allowed).read([url], [0], [4], ["v/0"])
    inside = _one_chunk_group("inside.bin")
    values = refzarr.open_dataset(inside, allowed_protocols=allowed)["v"].values
    np.testing.assert_array_equal(values, np.arange(4, dtype="u1"))


def test_template_rendered_urls_are_judged_after_rendering(allowed_dir: Path) -> None:
    outside = allowed_dir.parent / "outside.bin"
    refs = {
        "version": 1,
        "templates": {"u": f"local:{outside.parent}"},
        "refs": {
            ".zgroup": '{"zarr_format":2}',
            "v/.zarray": '{"shape":[4],"chunks":[4],"dtype":"|u1","fill_value":null,'
            '"order":"C","filters":null,"compressor":null,"zarr_format":2}',
            "v/.zattrs": '{"_ARRAY_DIMENSIONS":["x"]}',
            "v/0": ["{{u}}/outside.bin", 0, 4],
        },
    }
    with pytest.raises(ForbiddenURLError, match=r"outside\.bin"):
        refzarr.open_dataset(refs, allowed_protocols=[allowed_dir.as_uri() + "/"])["v"].values  # noqa: B018
    assert os.path.exists(outside)
