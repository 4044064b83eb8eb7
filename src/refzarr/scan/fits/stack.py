"""Stacking image extensions that share a name (one per CCD) into one array along a new
leading dimension, each extension's chunks kept as they are."""

from __future__ import annotations

from typing import Any

from refzarr.model import RefArray

__all__ = ["stack_extensions"]


def stack_extensions(
    members: dict[str, RefArray], hdus: list[Any], names: list[str]
) -> dict[str, RefArray]:
    """``members`` with extensions sharing a name stacked (placeholder: unchanged)."""
    return members
