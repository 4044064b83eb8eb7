"""The in-memory reference model: pure data (numpy only), immutable, validated at construction."""

from refzarr.model.grid import RectilinearAxis
from refzarr.model.group import RefArray, RefGroup
from refzarr.model.manifest import (
    INLINED,
    MISSING,
    WHOLE_FILE,
    ChunkManifest,
    ChunkRef,
    ManifestBlock,
    ManifestSource,
)
from refzarr.model.meta import ArrayMeta

__all__ = [
    "INLINED",
    "MISSING",
    "WHOLE_FILE",
    "ArrayMeta",
    "ChunkManifest",
    "ChunkRef",
    "ManifestBlock",
    "ManifestSource",
    "RectilinearAxis",
    "RefArray",
    "RefGroup",
]
