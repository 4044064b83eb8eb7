"""Reading data through references: a fast array reader (and, built on it, a zarr Store and an
xarray backend)."""

from refzarr.codecs.chunk import ChunkDecoder
from refzarr.reader.array import ArrayReader

__all__ = ["ArrayReader", "ChunkDecoder"]
