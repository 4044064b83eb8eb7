"""fsspec's Parquet reference layout (``.zmetadata`` + ``<array>/refs.<i>.parq``) -> `RefGroup`."""

from __future__ import annotations

from typing import Any

from refzarr.formats.source import Location
from refzarr.model.group import RefGroup

__all__ = ["expand_parquet", "read_parquet"]


def read_parquet(location: Location, *, target: str | None) -> RefGroup:
    """The `RefGroup` of a Parquet reference set; manifests load one record file at a time."""
    raise NotImplementedError


def expand_parquet(location: Location) -> dict[str, Any]:
    """Every key of a Parquet reference set in Version 0 form."""
    raise NotImplementedError
