"""`joined_entries`: rows of several manifest blocks as one record's entries (a Parquet record
spanning blocks on writing, an appended record's old and new rows), URLs renumbered."""

from __future__ import annotations

import numpy as np

from refzarr.formats.parquet.tables import joined_entries
from refzarr.model import INLINED, MISSING, ManifestBlock


def _block(
    start: int, paths: tuple[str, ...], ids: list[int], inlined: dict[int, bytes]
) -> ManifestBlock:
    """Chunk k of a referenced row at offset 10 k, 5 bytes long."""
    path_id = np.array(ids, np.int32)
    offsets = np.arange(start, start + len(ids), dtype=np.uint64) * 10
    lengths = np.full(len(ids), 5, np.uint64)
    referenced = path_id >= 0
    return ManifestBlock(start, paths, path_id, offsets * referenced, lengths * referenced, inlined)


def test_rows_of_two_blocks_keep_only_the_urls_they_use() -> None:
    first = _block(0, ("a", "b"), [0, 0, INLINED, 1], {2: b"two"})
    second = _block(4, ("c", "b", "d"), [1, MISSING, INLINED, 0], {6: b"six"})
    joined = joined_entries(2, [(first, 2, 6, 0), (second, 2, 6, 0)])
    assert joined.start == 2
    assert tuple(joined.paths) == ("b",)  # "a", "c" and "d" unused by rows 2..5
    assert joined.path_id.tolist() == [INLINED, 0, 0, MISSING]
    assert joined.offset.tolist() == [0, 30, 40, 0]
    assert dict(joined.inlined) == {2: b"two"}


def test_each_piece_moves_by_its_shift() -> None:
    old = _block(0, ("a",), [0, 0], {})
    new = _block(0, ("n",), [INLINED, 0, 0], {0: b"zero"})
    joined = joined_entries(0, [(old, 0, 2, 0), (new, 1, 3, 1)])  # new chunk k is chunk k + 1
    assert tuple(joined.paths) == ("a", "n")
    assert joined.path_id.tolist() == [0, 0, 1, 1]
    assert dict(joined.inlined) == {}
    shifted = joined_entries(2, [(new, 0, 2, 2)])
    assert shifted.path_id.tolist() == [INLINED, 0]
    assert dict(shifted.inlined) == {2: b"zero"}
