"""Reference sets of one array, as the hostile tests hand them to refzarr."""

from __future__ import annotations

import json
from typing import Any


def one_array_set(zarray: dict[str, Any], chunk: Any) -> dict[str, Any]:
    """A version-1 kerchunk set of one Zarr v2 array ``a`` along ``x`` (``zarray`` its
    metadata) whose chunk ``a/0`` is ``chunk`` (inline text or a ``[url, offset, length]``)."""
    return {
        "version": 1,
        "refs": {
            ".zgroup": '{"zarr_format":2}',
            "a/.zarray": json.dumps(zarray),
            "a/.zattrs": '{"_ARRAY_DIMENSIONS":["x"]}',
            "a/0": chunk,
        },
    }
