"""`RefGroup` -> fsspec's Parquet reference layout, with explicit column types."""

from __future__ import annotations

from typing import Any

from refzarr.model.group import RefGroup

__all__ = ["write_parquet"]


def write_parquet(group: RefGroup, fs: Any, root: str, *, record_size: int) -> None:
    """Write ``group`` as ``root/.zmetadata`` and ``root/<array>/refs.<i>.parq``."""
    raise NotImplementedError
