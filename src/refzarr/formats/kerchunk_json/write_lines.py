"""The ``"key":value,`` lines of a manifest block's chunks, built column-wise with pyarrow.

No Python runs per chunk (inlined chunks aside): chunk keys are taken from small tables of
index strings, URLs from a table of JSON string literals (escaped once per unique URL) by
path id, offsets and lengths are cast to text, and one kernel call joins the columns. The
data buffer of the joined string array *is* the text of the lines, so it is used as is.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from refzarr.model.kerchunk import encode_inline
from refzarr.model.manifest import INLINED, MISSING, WHOLE_FILE, ManifestBlock

__all__ = [
    "BlockLines",
    "ChunkKeys",
    "arrow_numbers",
    "arrow_strings",
    "join",
    "numpy_view",
    "quote",
    "quote_all",
    "to_arrow",
]

SLICE_ROWS = 1 << 18
"""Most chunk lines rendered in one kernel call (keeps intermediates in cache-friendly sizes)."""
SLICE_BYTES = 64 << 20
"""Most bytes of text one slice may produce (an Arrow string array holds at most 2 GiB)."""
_NEEDS_ESCAPE = r'["\\\x00-\x1f]'
_NUMBER_BYTES = 20  # digits of the largest uint64

Int64Array = npt.NDArray[np.int64]


def quote(text: str) -> str:
    """The JSON string literal of ``text``, as ``json.dumps(text, ensure_ascii=False)`` writes it.

    A lone surrogate (not encodable as UTF-8) makes the literal fall back to ASCII escapes.
    """
    literal = json.dumps(text, ensure_ascii=False)
    try:
        literal.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(text)
    return literal


def to_arrow(texts: Sequence[str]) -> Any:
    """``texts`` as an Arrow string array, or None when one holds a lone surrogate."""
    try:
        return arrow_strings(texts)
    except UnicodeEncodeError:
        return None


# Arrays are made from and read through their buffers, not with ``pa.array`` / ``to_numpy``:
# those ask pyarrow's pandas shim whether their input is a pandas object, which imports pandas
# (~0.4 s CPU, more on a loaded machine: most of a first JSON write's time in a fresh process).


def arrow_numbers(values: npt.NDArray[Any]) -> Any:
    """A 1-D numeric (not boolean) numpy array as an Arrow array over the same memory."""
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
    buffers = [None, pa.py_buffer(values)]
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), buffers)


def numpy_view(array: Any, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """An Arrow array of ``dtype`` without nulls as a numpy array over its data buffer."""
    if array.type != pa.from_numpy_dtype(dtype) or array.null_count:
        raise TypeError(f"expected {dtype.__name__} values without nulls, got {array.type}")
    return np.frombuffer(
        array.buffers()[1], dtype, count=len(array), offset=array.offset * np.dtype(dtype).itemsize
    )


def arrow_strings(texts: Sequence[str]) -> Any:
    """``texts`` as an Arrow string array (UnicodeEncodeError for a lone surrogate)."""
    encoded = [text.encode("utf-8") for text in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:  # beyond one string array: pyarrow chunks it
        return pa.array(texts, pa.string())
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


def join(*parts: Any) -> Any:
    """Row-wise concatenation of string arrays and strings (``binary_join_element_wise``)."""
    return pc.binary_join_element_wise(*(_scalar(p) if isinstance(p, str) else p for p in parts))


@functools.lru_cache(maxsize=1024)
def _scalar(text: str) -> Any:
    """An Arrow string scalar (pyarrow would look for pandas to convert a Python str)."""
    return arrow_strings([text])[0]


def quote_all(texts: Sequence[str] | pa.Array) -> Any:
    """JSON string literals of many strings; only those needing escapes go through `quote`."""
    array = texts if isinstance(texts, pa.Array) else to_arrow(texts)
    if array is None:
        return arrow_strings([quote(t) for t in texts])
    quoted = join('"', array, '"', "")
    special = pc.match_substring_regex(array, _NEEDS_ESCAPE)
    if not pc.any(special).as_py():
        return quoted
    escaped = [quote(t) for t in pc.filter(array, special).to_pylist()]
    return pc.replace_with_mask(quoted, special, arrow_strings(escaped))


class ChunkKeys:
    """Key columns (``"path/i.j":``) of one array's chunks, from their C-order chunk numbers."""

    def __init__(self, path: str, grid_shape: tuple[int, ...], separator: str) -> None:
        self.prefix = quote(f"{path}/")[:-1]  # the opening quote and the escaped "path/"
        self.grid = grid_shape
        self.separator = separator
        self.strides = [math.prod(grid_shape[d + 1 :]) for d in range(len(grid_shape))]

    @property
    def max_bytes(self) -> int:
        """An upper bound of the bytes of one key column entry."""
        digits = sum(len(str(max(n - 1, 0))) + 1 for n in self.grid)
        return len(self.prefix.encode("utf-8")) + digits + 3

    def columns(self, numbers: Int64Array) -> list[Any]:
        """String columns whose row-wise concatenation is the key of each chunk number."""
        if not self.grid:
            key = arrow_strings([f'{self.prefix}0":'])
            return [key.take(arrow_numbers(np.zeros_like(numbers)))]
        last = len(self.grid) - 1
        out = []
        for d, (size, stride) in enumerate(zip(self.grid, self.strides, strict=True)):
            index = numbers // stride
            if d:
                index %= size
            low, high = int(index.min()), int(index.max())
            digits = _digits(np.arange(low, high + 1, dtype=np.int64))
            head = self.prefix if d == 0 else ""
            tail = '":' if d == last else self.separator
            table = join(head, digits, tail, "")
            out.append(table.take(arrow_numbers(index - low)))
        return out


@dataclass(frozen=True, slots=True, eq=False)
class BlockLines:
    """Renders the lines of one manifest block, a slice of rows at a time.

    ``ref_urls[i]`` is ``["<url i>",`` and ``whole_urls[i]`` is ``["<url i>"]`` (JSON string
    literals of the block's URLs, possibly rewritten to use Version 1 templates).
    """

    keys: ChunkKeys
    block: ManifestBlock
    ref_urls: Any
    whole_urls: Any

    @classmethod
    def build(cls, keys: ChunkKeys, block: ManifestBlock, literals: Any) -> BlockLines:
        """Lines of ``block`` whose URLs are the JSON string literals ``literals``."""
        ref_urls = join("[", literals, ",", "")
        whole_urls = join("[", literals, "]", "")
        return cls(keys, block, ref_urls, whole_urls)

    def slices(self) -> list[tuple[int, int]]:
        """Row ranges, each rendering to at most `SLICE_BYTES` bytes."""
        rows = self.block.path_id.shape[0]
        per_slice = max(1, min(SLICE_ROWS, SLICE_BYTES // self._max_line_bytes()))
        return [(start, min(rows, start + per_slice)) for start in range(0, rows, per_slice)]

    def _max_line_bytes(self) -> int:
        url = pc.max(pc.binary_length(self.ref_urls)).as_py() or 0
        inline = max((len(d) for d in self.block.inlined.values()), default=0)
        value = max(url + 2 * _NUMBER_BYTES + 2, 6 * inline + 16)
        return self.keys.max_bytes + value + 2

    def render(self, start: int, stop: int) -> memoryview:
        """The text of the lines of rows ``start .. stop`` (block-relative), missing omitted."""
        block = self.block
        ids = block.path_id[start:stop]
        lengths = block.length[start:stop]
        numbers = np.arange(block.start + start, block.start + stop, dtype=np.int64)
        if ids.size and ids.min() >= 0 and not (lengths == WHOLE_FILE).any():
            offsets = _digits(block.offset[start:stop])
            values = [self.ref_urls.take(arrow_numbers(ids)), offsets, ",", _digits(lengths), "]"]
        else:
            rows = np.flatnonzero(ids != MISSING)
            if rows.size == 0:
                return memoryview(b"")
            numbers = numbers[rows]
            values = [self._mixed_values(rows + start)]
        lines = join(*self.keys.columns(numbers), *values, ",\n", "")
        return _text(lines)

    def _mixed_values(self, rows: Int64Array) -> Any:
        """Values of present rows when some are whole-file or inlined, in row order."""
        block = self.block
        ids, lengths = block.path_id[rows], block.length[rows]
        whole = lengths == WHOLE_FILE
        ref = np.flatnonzero((ids >= 0) & ~whole)
        whole_file = np.flatnonzero((ids >= 0) & whole)
        inline = np.flatnonzero(ids == INLINED)
        parts = [
            join(
                self.ref_urls.take(arrow_numbers(ids[ref])),
                _digits(block.offset[rows[ref]]),
                ",",
                _digits(lengths[ref]),
                "]",
                "",
            ),
            self.whole_urls.take(arrow_numbers(ids[whole_file])),
            arrow_strings(
                [quote(encode_inline(block.inlined[block.start + int(r)])) for r in rows[inline]]
            ),
        ]
        order = np.argsort(np.concatenate([ref, whole_file, inline]))
        return pa.concat_arrays(parts).take(arrow_numbers(order))


def _digits(values: npt.NDArray[Any]) -> Any:
    return pc.cast(arrow_numbers(values), pa.string())


def _text(lines: Any) -> memoryview:
    """The bytes of a string array's values, back to back (its data buffer, not copied)."""
    if len(lines) == 0:
        return memoryview(b"")
    _, offsets, data = lines.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32, count=len(lines) + 1, offset=4 * lines.offset)
    first, last = int(bounds[0]), int(bounds[-1])
    return memoryview(data.slice(first, last - first))
