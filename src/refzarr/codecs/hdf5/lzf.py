"""A numcodecs codec for h5py's LZF filter (32000): a raw LZF stream of a chunk of known size.

imagecodecs' ``Lzf(header=False)`` (``imagecodecs_lzf``, the id VirtualiZarr emits) must guess
the decompressed size when the caller passes no output buffer, which zarr never does, and fails
on chunks that compress well. The HDF5 filter records the chunk's size in its client values;
this codec carries it and decodes with imagecodecs into a buffer of exactly that size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec

__all__ = ["Hdf5Lzf"]


class Hdf5Lzf(Codec):  # type: ignore[misc]
    """LZF without a header, decompressing into ``size`` bytes.

    Parameters
    ----------
    size
        Bytes of a full uncompressed chunk (the filter's ``cd_values[2]``).
    """

    codec_id = "refzarr_hdf5_lzf"

    def __init__(self, size: int) -> None:
        self.size = int(size)

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {"id": self.codec_id, "size": self.size}

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The decompressed chunk."""
        import imagecodecs

        result = imagecodecs.lzf_decode(buf, header=False, out=self.size)
        if out is not None:
            np.copyto(np.frombuffer(out, dtype=np.uint8), np.frombuffer(result, dtype=np.uint8))
            return out
        return result

    def encode(self, buf: Any) -> bytes:
        """The chunk as the HDF5 filter stores it (may be longer than ``buf`` if incompressible;
        HDF5 then stores the chunk unfiltered instead)."""
        import imagecodecs

        return bytes(imagecodecs.lzf_encode(np.ascontiguousarray(buf).tobytes(), header=False))
