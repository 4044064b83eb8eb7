"""A DMR++ sidecar from a stranger cannot make a scan read files elsewhere: chunk and block
``href``s are read (to inline them) only beside the data file (its scheme and host or bucket;
a local data file's own path). A sidecar whose linked blocks named
``file:///home/me/.aws/credentials`` had its bytes inlined into the reference set by a scan
with default options. Chunks elsewhere are still referenced (the reader's allow-list judges
them when they are read)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

import refzarr
from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan.dmrpp.locate import DataFiles

HEAD = """<?xml version="1.0" encoding="UTF-8"?>
<Dataset xmlns="http://xml.opendap.org/ns/DAP/4.0#"
 xmlns:dmrpp="http://xml.opendap.org/dap/dmrpp/1.0.0#" name="x.h5" dmrpp:href="data/x.h5">
"""
VALUES = np.arange(8, dtype="<i4")
SECRET = b"AWS_SECRET=hunter2hunter2hunter2hunter2"


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, int, Path]:
    """The data file, the offset of `VALUES` in it, and a secret outside it."""
    folder = tmp_path / "granules"
    folder.mkdir()
    path = folder / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=VALUES)
        offset = f["v"].id.get_offset()
    secret = tmp_path / "credentials"
    secret.write_bytes(SECRET)
    return path, offset, secret


def sidecar(data_path: Path, chunks: str) -> str:
    body = f'<Int32 name="v"><Dim size="8"/><dmrpp:chunks>{chunks}</dmrpp:chunks></Int32>'
    path = data_path.parent / f"{data_path.name}.dmrpp"
    path.write_text(HEAD + body + "\n</Dataset>\n")
    return str(path)


def blocks(offset: int, href: str) -> str:
    return (
        f'<dmrpp:block offset="{offset}" nBytes="12"/>'
        f'<dmrpp:block href="{href}" offset="0" nBytes="20"/>'
    )


@pytest.mark.parametrize(
    "spelling", ["file://{secret}", "file://{folder}/../credentials", "local://{secret}"]
)
def test_linked_blocks_elsewhere_are_never_read(
    data: tuple[Path, int, Path], spelling: str
) -> None:
    path, offset, secret = data
    href = spelling.format(secret=secret, folder=path.parent)
    with pytest.raises(UnsupportedFeatureError, match=r"variable '/v': a chunk's href") as info:
        refzarr.scan(sidecar(path, blocks(offset, href)))
    assert "is not beside the data file" in str(info.value)


def test_small_chunks_elsewhere_are_not_inlined(data: tuple[Path, int, Path]) -> None:
    path, _, secret = data
    chunk = f'<dmrpp:chunk href="{secret.as_uri()}" offset="0" nBytes="32"/>'
    with pytest.raises(UnsupportedFeatureError, match="is not beside the data file"):
        refzarr.scan(sidecar(path, chunk), inline_threshold=100)
    group = refzarr.scan(sidecar(path, chunk))  # referenced, not read
    assert group["v"].manifest.paths == (secret.as_uri(),)


def test_the_data_file_by_its_url_is_beside_itself(data: tuple[Path, int, Path]) -> None:
    path, offset, _ = data
    got = refzarr.scan(sidecar(path, blocks(offset, f"file://{path}").replace('"0"', '"x"')
                                 .replace('offset="x"', f'offset="{offset + 12}"')))  # fmt: skip
    assert got["v"].manifest.paths == ()
    np.testing.assert_array_equal(refzarr.open_dataset(got)["v"].values, VALUES)


@pytest.mark.parametrize(
    ("data_url", "href", "beside"),
    [
        ("s3://bucket/a/x.h5", "s3://bucket/b/y.h5", True),
        ("s3://bucket/a/x.h5", "s3://BUCKET/b/y.h5", True),
        ("s3://bucket/a/x.h5", "s3://other/x.h5", False),
        ("s3://bucket/a/x.h5", "https://bucket/a/x.h5", False),
        ("s3://bucket/a/x.h5", "file:///etc/passwd", False),
        ("https://host/a/x.h5", "https://host/b/y.h5", True),
        ("https://host/a/x.h5", "https://host.evil/a/x.h5", False),
        ("https://host/a/x.h5", "http://169.254.169.254/latest/meta-data/", False),
        ("/data/x.h5", "file:///data/y.h5", False),
        ("/data/x.h5", "s3://bucket/x.h5", False),
    ],
)
def test_what_is_beside(data_url: str, href: str, beside: bool) -> None:
    files = DataFiles(data_url, "data/x.h5")
    opened: list[str] = []

    class Nowhere:
        def cat_file(self, path: str, start: int, end: int) -> bytes:
            opened.append(path)
            raise OSError("not here")

    files._fs = lambda url: (Nowhere(), url)  # type: ignore[method-assign]
    if beside:
        with pytest.raises(ScanError, match="not here"):
            files.read(href, 0, 4, "v")
        assert opened == [href]
    else:
        with pytest.raises(UnsupportedFeatureError, match="is not beside the data file"):
            files.read(href, 0, 4, "v")
        assert opened == []
