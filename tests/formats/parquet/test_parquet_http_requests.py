"""Reading a Parquet set over HTTP costs no request it does not need: a suffix-less set's
``.zmetadata`` is downloaded once (not once to tell the format and again to read it), and a
missing set is not asked whether it is a directory (a GET over HTTP, which has none)."""

from __future__ import annotations

import functools
import http.server
from collections.abc import Iterator
from typing import Any

import h5py
import numpy as np
import pytest

import refzarr
from httpkit import serving


class _Counting(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; every request's method and path go to ``log``."""

    def __init__(self, *args: Any, log: list[tuple[str, str]], **kwargs: Any) -> None:
        self.log = log
        super().__init__(*args, **kwargs)

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.log.append(("GET", self.path))
        super().do_GET()

    def do_HEAD(self) -> None:
        self.log.append(("HEAD", self.path))
        super().do_HEAD()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Any], Any]]:
    """The server's URL, its request log, and the group written there (``set.parq`` and the
    suffix-less ``plain``)."""
    folder = tmp_path_factory.mktemp("http")
    with h5py.File(folder / "d.h5", "w") as f:
        f.create_dataset("x", data=np.arange(10), chunks=(5,))
    group = refzarr.scan(str(folder / "d.h5"))
    refzarr.write(group, folder / "set.parq")
    refzarr.write(group, folder / "plain", format="parquet")
    log: list[tuple[str, str]] = []
    with serving(functools.partial(_Counting, directory=str(folder), log=log)) as url:
        yield url, log, group


def _requests(served: tuple[str, list[Any], Any], name: str) -> tuple[Any, list[Any]]:
    url, log, _ = served
    log.clear()
    try:
        found: Any = refzarr.read(f"{url}/{name}")
    except refzarr.RefzarrError as exc:
        found = exc
    return found, list(log)


@pytest.mark.parametrize("name", ["set.parq", "plain"])
def test_zmetadata_is_downloaded_once(served: tuple[str, list[Any], Any], name: str) -> None:
    group, requests = _requests(served, name)
    assert group == served[2]
    assert requests.count(("GET", f"/{name}/.zmetadata")) == 1
    assert not [r for r in requests if r[0] == "HEAD"]


def test_a_missing_set_costs_one_request(served: tuple[str, list[Any], Any]) -> None:
    error, requests = _requests(served, "missing.parq")
    assert isinstance(error, refzarr.SourceNotFoundError)
    assert "missing.parq: no such reference set" in str(error)
    assert requests == [("GET", "/missing.parq/.zmetadata")]
