"""GR raster images (the ``RIG0.0`` vgroup of ``RI0.0`` image vgroups) under ``images/``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refzarr.model import RefGroup
from refzarr.scan.hdf4.storage import Context

__all__ = ["read_images"]


def read_images(
    ctx: Context, guarded: Callable[[str, Callable[[], Any]], Any], used: set[int]
) -> RefGroup:
    """The group of GR images (empty when the file has none)."""
    return RefGroup({}, {})
