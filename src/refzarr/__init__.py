"""refzarr: archival scientific files as virtual Zarr, through kerchunk-compatible references.

The public API is what ``__all__`` lists; everything else is private.
"""

from refzarr.errors import (
    ChunkDecodeError,
    ChunkFetchError,
    RefFormatError,
    RefzarrError,
    ScanError,
    SourceNotFoundError,
    UnsupportedFeatureError,
)
from refzarr.formats.api import expand_references, read, write
from refzarr.model import ArrayMeta, ChunkManifest, ChunkRef, RefArray, RefGroup
from refzarr.scan import scan

__version__ = "0.1.0.dev0"

__all__ = [
    "ArrayMeta",
    "ChunkDecodeError",
    "ChunkFetchError",
    "ChunkManifest",
    "ChunkRef",
    "RefArray",
    "RefFormatError",
    "RefGroup",
    "RefzarrError",
    "ScanError",
    "SourceNotFoundError",
    "UnsupportedFeatureError",
    "__version__",
    "expand_references",
    "read",
    "scan",
    "write",
]
