"""Zarr v3 codecs that Zarr v2 metadata (and so kerchunk references) cannot express, as numcodecs
codecs: a sharded array's shard (`ZarrSharding`, ``refzarr.zarr_sharding``) and an axis
permutation other than C or F order (`ZarrTranspose`, ``refzarr.zarr_transpose``).

Importing this package registers both with numcodecs; they need numpy and numcodecs only.
"""

from __future__ import annotations

from refzarr.codecs.zarr.sharding import ZarrSharding
from refzarr.codecs.zarr.transpose import ZarrTranspose

__all__ = ["ZarrSharding", "ZarrTranspose"]
