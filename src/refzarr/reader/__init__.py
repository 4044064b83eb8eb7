"""Reading data through references: a fast array reader (and, built on it, a zarr Store and an
xarray backend)."""

from refzarr.reader.array import ArrayReader
from refzarr.reader.decode import ChunkDecoder

__all__ = ["ArrayReader", "ChunkDecoder"]
