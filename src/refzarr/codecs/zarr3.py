"""Any numcodecs codec as a Zarr v3 bytes-to-bytes codec (``refzarr.numcodecs``), so that an
array's numcodecs pipeline (refzarr's model, Zarr v2's filters + compressor) is written to Zarr
v3 stores (Icechunk) unchanged: each stage decodes the previous stage's bytes exactly as a Zarr
v2 reader would."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numcodecs
import numpy as np
from zarr.abc.codec import BytesBytesCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer
from zarr.registry import register_codec

__all__ = ["CODEC_NAME", "NumcodecsStage"]

CODEC_NAME = "refzarr.numcodecs"
"""The codec's name in ``zarr.json``; its configuration is the numcodecs config."""


@dataclass(frozen=True)
class NumcodecsStage(BytesBytesCodec):
    """One numcodecs codec, bytes in and bytes out, as a Zarr v2 pipeline applies it.

    Parameters
    ----------
    codec
        The numcodecs config (``{"id": "zlib", "level": 4}``).
    """

    codec: dict[str, Any] = field(default_factory=dict)
    is_fixed_size = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NumcodecsStage:
        """From ``{"name": "refzarr.numcodecs", "configuration": {...numcodecs config}}``."""
        return cls(codec=dict(data.get("configuration") or {}))

    def to_dict(self) -> dict[str, Any]:
        """``{"name": "refzarr.numcodecs", "configuration": {...numcodecs config}}``."""
        return {"name": CODEC_NAME, "configuration": dict(self.codec)}

    def _numcodec(self) -> Any:
        return numcodecs.get_codec(dict(self.codec))

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        decoded = self._numcodec().decode(chunk_bytes.as_array_like())
        data = np.ascontiguousarray(decoded).reshape(-1).view(np.uint8)
        return chunk_spec.prototype.buffer.from_bytes(data.tobytes())

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        encoded = self._numcodec().encode(chunk_bytes.as_array_like())
        data = np.ascontiguousarray(encoded).reshape(-1).view(np.uint8)
        return chunk_spec.prototype.buffer.from_bytes(data.tobytes())

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        raise NotImplementedError(f"{CODEC_NAME} ({self.codec.get('id')}) has no fixed size")


register_codec(CODEC_NAME, NumcodecsStage)
