"""HDF-EOS2 grids: 1-D coordinates computed from ``StructMetadata.0`` where the projection
allows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refzarr.model import RefArray, RefGroup

__all__ = ["grid_coordinates"]


def grid_coordinates(
    attributes: Mapping[str, Any], members: Mapping[str, RefArray | RefGroup], url: str
) -> dict[str, RefArray]:
    """Coordinate arrays for the grids ``StructMetadata.0`` describes (none yet)."""
    return {}
