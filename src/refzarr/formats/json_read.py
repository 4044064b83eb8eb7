"""Kerchunk JSON reference sets (Version 0 and 1) -> `RefGroup`, parsed column-wise."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from refzarr.errors import RefFormatError
from refzarr.model.group import RefGroup
from refzarr.model.kerchunk import decode_inline, group_from_kerchunk, parse_reference

__all__ = ["group_from_json", "load_json", "normalise_v0"]


def load_json(data: bytes, *, where: str) -> Any:
    """Parse JSON text with errors that name the file."""
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RefFormatError(f"{where}: not valid JSON ({exc})") from exc


def group_from_json(data: bytes, *, target: str | None, where: str) -> RefGroup:
    """The `RefGroup` a JSON reference set describes (placeholder: the per-key path)."""
    refs = load_json(data, where=where)
    if not isinstance(refs, Mapping):
        raise RefFormatError(f"{where}: a reference set must be a JSON object")
    return group_from_kerchunk(refs, target=target, where=where)


def normalise_v0(refs: Mapping[str, Any], *, target: str | None, where: str) -> dict[str, Any]:
    """Validate an expanded Version 0 dict; ``base64:`` values decoded to bytes."""
    out: dict[str, Any] = {}
    for key, value in refs.items():
        if isinstance(value, list):
            url, offset, length = parse_reference(key, value, target=target, where=where)
            out[key] = [url] if length is None else [url, offset, length]
        elif isinstance(value, str) and value.startswith("base64:"):
            out[key] = decode_inline(key, value, where=where)
        elif isinstance(value, str | bytes | dict):
            out[key] = value
        else:
            raise RefFormatError(
                f"{where}: key {key!r}: a value must be text, an object or a reference list, "
                f"got {type(value).__name__}"
            )
    return out
