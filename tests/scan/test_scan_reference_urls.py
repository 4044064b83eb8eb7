"""One rule for how references name a local file, in every scanner: the absolute path the
system opens, whether the file was given as a relative path, an absolute path or a ``file://``
URL (the HDF5 scanner's rule from the start; HDF4, FITS, TIFF and DMR++ kept ``file://``)."""

from __future__ import annotations

import pytest

import refzarr
from corpus import ONE_PER_FORMAT

FILES = ONE_PER_FORMAT


def _urls(group: refzarr.RefGroup) -> set[str]:
    return {url for _, array in group.arrays() for url in array.manifest.paths if url}


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_local_file_is_named_by_its_absolute_path(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = FILES[name]
    if not path.exists():
        pytest.skip("corpus absent")
    by_path = refzarr.scan(str(path))
    urls = _urls(by_path)
    assert urls, "no chunk references to judge"
    data = path.with_suffix("") if name == "dmrpp" else path  # a sidecar names its data file
    assert all(u == str(data) or u.startswith(f"{data}/") for u in urls), urls
    assert refzarr.scan(path.as_uri()) == by_path
    assert refzarr.scan(path.as_uri(), storage_options={}) == by_path
    monkeypatch.chdir(path.parent)
    assert refzarr.scan(path.name) == by_path
