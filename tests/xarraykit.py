"""Running xarray's own backend test classes through refzarr: scan, write JSON references,
open them with ``engine="refzarr"``; and the one list of tests that cannot pass."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import xarray as xr

import refzarr

__all__ = ["mark_known", "through_refzarr"]


def mark_known(request: pytest.FixtureRequest, known: Mapping[str, str]) -> None:
    """Mark the running test a strict xfail when ``known`` (name without parameters ->
    reason) lists it: a fix then shows up as a failure of the list."""
    reason = known.get(request.node.originalname)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))


def through_refzarr(scan_format: str | None = None) -> type:
    """A mixin whose ``open`` scans the file (as ``scan_format``, else detected), writes JSON
    references beside it and opens them with ``engine="refzarr"``."""

    class ThroughRefzarr:
        @contextlib.contextmanager
        def open(self, path: str | os.PathLike[str], **kwargs: Any) -> Iterator[xr.Dataset]:
            refs = f"{os.fspath(path)}.refs.json"
            refzarr.write(refzarr.scan(os.fspath(path), format=scan_format), refs)
            try:
                with xr.open_dataset(refs, engine="refzarr", **kwargs) as ds:
                    yield ds
            finally:
                os.remove(refs)

    return ThroughRefzarr
