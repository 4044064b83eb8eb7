"""HDF4 compression codecs numcodecs lacks: run-length, skipping Huffman, N-bit and HDF4's
szip framing, registered under ``refzarr.hdf4_<name>``.

Each decodes one HDF4 compressed element (a whole dataset or one chunk) into the bytes HDF4
stores before compression: the number type's external form (big-endian unless the type is
flagged little-endian), so the array's dtype is the stored one. Importable without imagecodecs
(only the szip codec needs it, imported when decoding).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy
from numcodecs.registry import register_codec

__all__ = ["Hdf4NBit", "Hdf4Rle", "Hdf4SkipHuffman", "Hdf4Szip"]


class _Hdf4Codec(Codec):  # type: ignore[misc]
    """Decode-only HDF4 codec producing ``size`` bytes per element."""

    codec_id = "refzarr.hdf4_base"

    def __init__(self, size: int) -> None:
        self.size = int(size)
        if self.size < 0:
            raise ValueError(f"size must be >= 0, got {size}")

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        config = {"id": self.codec_id}
        config.update({k: v for k, v in vars(self).items() if not k.startswith("_")})
        return config

    def encode(self, buf: Any) -> Any:
        """Not supported: refzarr only reads HDF4 files."""
        raise NotImplementedError(f"{self.codec_id} decodes only; HDF4 files are written by HDF4")

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The decompressed bytes (``size`` of them), into ``out`` when given."""
        data = ensure_contiguous_ndarray(buf).view(np.uint8).tobytes()
        decoded = np.frombuffer(self._decode(data), dtype=np.uint8)
        return ndarray_copy(decoded, out)

    def _decode(self, data: bytes) -> bytes:
        raise NotImplementedError

    def _sized(self, decoded: bytes | bytearray) -> bytes:
        if len(decoded) < self.size:
            raise ValueError(
                f"{self.codec_id}: compressed data decodes to {len(decoded)} bytes, "
                f"{self.size} expected (damaged data?)"
            )
        return bytes(decoded[: self.size])


class Hdf4Rle(_Hdf4Codec):
    """HDF4 run-length encoding (``COMP_CODE_RLE``): a control byte with the high bit set is
    a run of ``(c & 0x7f) + 3`` copies of the next byte, else ``c + 1`` literal bytes follow.

    Parameters
    ----------
    size
        Bytes the element decodes to.
    """

    codec_id = "refzarr.hdf4_rle"

    def _decode(self, data: bytes) -> bytes:
        out = bytearray()
        pos, end = 0, len(data)
        while pos < end and len(out) < self.size:
            control = data[pos]
            if control & 0x80:
                if pos + 1 >= end:
                    break
                out += data[pos + 1 : pos + 2] * ((control & 0x7F) + 3)
                pos += 2
            else:
                count = control + 1
                out += data[pos + 1 : pos + 1 + count]
                pos += 1 + count
        return self._sized(out)


class Hdf4SkipHuffman(_Hdf4Codec):
    """HDF4 skipping Huffman (``COMP_CODE_SKPHUFF``): adaptive splay-tree codes, one tree per
    byte position within an element of ``skip_size`` bytes.

    Parameters
    ----------
    size
        Bytes the element decodes to.
    skip_size
        Bytes per element (one code tree per byte position).
    """

    codec_id = "refzarr.hdf4_skphuff"

    def __init__(self, size: int, skip_size: int) -> None:
        super().__init__(size)
        self.skip_size = int(skip_size)
        if self.skip_size < 1:
            raise ValueError(f"skip_size must be >= 1, got {skip_size}")

    def _decode(self, data: bytes) -> bytes:
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8)).tolist()
        trees = [_splay_tree() for _ in range(self.skip_size)]
        out = bytearray(self.size)
        pos, nbits = 0, len(bits)
        for k in range(self.size):
            left, right, up = trees[k % self.skip_size]
            node = 0
            while node < 256:
                if pos >= nbits:
                    raise ValueError(
                        f"{self.codec_id}: compressed data ends after {k} of {self.size} bytes"
                    )
                node = right[node] if bits[pos] else left[node]
                pos += 1
            plain = node - 256
            _splay(left, right, up, node)
            out[k] = plain
        return bytes(out)


def _splay_tree() -> tuple[list[int], list[int], list[int]]:
    """The initial tree: internal nodes 0..255, leaves 256..511 (byte value + 256)."""
    left = [2 * j for j in range(256)]
    right = [2 * j + 1 for j in range(256)]
    up = [(i >> 1) & 0xFF for i in range(513)]
    return left, right, up


def _splay(left: list[int], right: list[int], up: list[int], leaf: int) -> None:
    """Move ``leaf`` up its tree by semi-rotations, as HDF4's coder does after each byte."""
    a = leaf
    while True:
        c = up[a]
        if c == 0:
            return
        d = up[c]
        b = left[d]
        if c == b:
            b = right[d]
            right[d] = a
        else:
            left[d] = a
        if a == left[c]:
            left[c] = b
        else:
            right[c] = b
        up[a] = d
        up[b] = c
        a = d
        if a == 0:
            return


class Hdf4NBit(_Hdf4Codec):
    """HDF4 N-bit coding (``COMP_CODE_NBIT``): ``bit_len`` bits ending at bit ``start_bit`` of
    each ``nt_size``-byte element, packed most significant bit first; the other bits are ones
    (``fill_one``) or zeros, and with ``sign_ext`` the bits above the field copy its top bit.

    Parameters
    ----------
    size
        Bytes the element decodes to.
    nt_size
        Bytes per element (its stored, big-endian form is what is rebuilt).
    start_bit
        Highest bit of the field (0: least significant bit of the element).
    bit_len
        Bits in the field.
    sign_ext
        Whether the bits above the field repeat its highest bit.
    fill_one
        Whether the bits outside the field are ones (else zeros).
    """

    codec_id = "refzarr.hdf4_nbit"

    def __init__(
        self,
        size: int,
        nt_size: int,
        start_bit: int,
        bit_len: int,
        sign_ext: bool = False,
        fill_one: bool = False,
    ) -> None:
        super().__init__(size)
        self.nt_size = int(nt_size)
        self.start_bit = int(start_bit)
        self.bit_len = int(bit_len)
        self.sign_ext = bool(sign_ext)
        self.fill_one = bool(fill_one)
        bits = 8 * self.nt_size
        if self.nt_size not in (1, 2, 4, 8) or not 0 < self.bit_len <= self.start_bit + 1 <= bits:
            raise ValueError(
                f"{self.bit_len} bits ending at bit {self.start_bit} do not fit "
                f"{self.nt_size}-byte elements"
            )

    def _decode(self, data: bytes) -> bytes:
        count = self.size // self.nt_size
        need = count * self.bit_len
        bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
        if bits.size < need:
            raise ValueError(f"{self.codec_id}: {bits.size} bits for {count} values of {need}")
        fields = bits[:need].reshape(count, self.bit_len).astype(np.uint64)
        weights = np.uint64(1) << np.arange(self.bit_len - 1, -1, -1, dtype=np.uint64)
        values = (fields * weights).sum(axis=1, dtype=np.uint64)
        low = self.start_bit - self.bit_len + 1
        all_bits = (1 << (8 * self.nt_size)) - 1
        field_mask = ((1 << self.bit_len) - 1) << low
        fill = all_bits & ~field_mask if self.fill_one else 0
        result = (values << np.uint64(low)) | np.uint64(fill)
        if self.sign_ext:
            above = all_bits & ~((1 << (self.start_bit + 1)) - 1)
            negative = (values >> np.uint64(self.bit_len - 1)) & np.uint64(1)
            result = np.where(
                negative == 1, result | np.uint64(above), result & np.uint64(all_bits & ~above)
            )
        stored: bytes = result.astype(f">u{self.nt_size}").tobytes()
        return stored + bytes(self.size - count * self.nt_size)


SZ_H4_REV_2 = 1 << 16
"""Option-mask bit HDF4 (4.2r1 and later) sets when each element starts with its 5-byte
preamble (a byte: 1 when stored uncompressed; a big-endian int32: the stream's length)."""


class Hdf4Szip(_Hdf4Codec):
    """HDF4 szip (``COMP_CODE_SZIP``): an szip stream after HDF4's 5-byte preamble, decoded by
    imagecodecs' szip.

    Parameters
    ----------
    size
        Bytes the element decodes to.
    options_mask, pixels_per_block, bits_per_pixel, pixels_per_scanline
        szip parameters as HDF4 stores them.
    """

    codec_id = "refzarr.hdf4_szip"

    def __init__(
        self,
        size: int,
        options_mask: int,
        pixels_per_block: int,
        bits_per_pixel: int,
        pixels_per_scanline: int,
    ) -> None:
        super().__init__(size)
        self.options_mask = int(options_mask)
        self.pixels_per_block = int(pixels_per_block)
        self.bits_per_pixel = int(bits_per_pixel)
        self.pixels_per_scanline = int(pixels_per_scanline)

    def _decode(self, data: bytes) -> bytes:
        stream = data
        if self.options_mask & SZ_H4_REV_2:
            if len(data) < 5:
                raise ValueError(f"{self.codec_id}: {len(data)} bytes, less than its preamble")
            used = int.from_bytes(data[1:5], "big")
            stream = data[5 : 5 + used]
            if data[0] == 1:
                return self._sized(stream)
        import imagecodecs

        decoded = imagecodecs.szip_decode(
            stream,
            options_mask=self.options_mask & ~SZ_H4_REV_2,
            pixels_per_block=self.pixels_per_block,
            bits_per_pixel=self.bits_per_pixel,
            pixels_per_scanline=self.pixels_per_scanline,
            header=False,
            out=self.size,
        )
        return self._sized(bytes(decoded))


for _codec in (Hdf4Rle, Hdf4SkipHuffman, Hdf4NBit, Hdf4Szip):
    register_codec(_codec)
