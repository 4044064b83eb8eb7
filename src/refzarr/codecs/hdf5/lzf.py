"""A numcodecs codec for h5py's LZF filter (32000): a raw LZF stream of a chunk of known size.

imagecodecs' ``Lzf(header=False)`` (``imagecodecs_lzf``, the id VirtualiZarr emits) must guess
the decompressed size when the caller passes no output buffer, which zarr never does, and fails
on chunks that compress well. The HDF5 filter records the chunk's size in its client values;
this codec carries it and decodes with imagecodecs into a buffer of that size, grown as h5py's
filter grows it when the stream holds more: LZF after another filter (gzip, fletcher32) holds
that filter's output, and a variable-length type's filter records no size at all.
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
        Bytes of a full uncompressed chunk (the filter's ``cd_values[2]``): the first guess of
        the decompressed size; 0 when the filter recorded none.
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

        data: Any = np.ascontiguousarray(buf).view(np.uint8).reshape(-1)
        size = self.size or 2 * len(data) or 1
        while True:
            try:
                result = imagecodecs.lzf_decode(data, header=False, out=size)
                break
            except imagecodecs.LzfError as exc:
                # h5py's filter retries with a larger buffer until the stream fits; LZF expands
                # at most ~100 times (a 2-byte back-reference of up to 264 bytes), so this ends
                if "not large enough" not in str(exc) or size > 256 * len(data) + 1024:
                    raise
                size *= 2
        if out is not None:
            np.copyto(np.frombuffer(out, dtype=np.uint8), np.frombuffer(result, dtype=np.uint8))
            return out
        return result

    def encode(self, buf: Any) -> bytes:
        """The chunk as the HDF5 filter stores it (may be longer than ``buf`` if incompressible;
        HDF5 then stores the chunk unfiltered instead)."""
        import imagecodecs

        return bytes(imagecodecs.lzf_encode(np.ascontiguousarray(buf).tobytes(), header=False))
