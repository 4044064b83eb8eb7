"""Counting what a reference set refers to, block by block (lazy manifests load one at a time)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from refzarr.model import INLINED, WHOLE_FILE, RefArray

__all__ = ["ArrayStats", "array_stats"]


@dataclass
class ArrayStats:
    """Chunk counts and sizes of one array, and the URLs its references use."""

    referenced: int = 0
    referenced_bytes: int = 0
    whole_files: int = 0
    inlined: int = 0
    inlined_bytes: int = 0
    missing: int = 0
    urls: set[str] = field(default_factory=set)

    def add(self, other: ArrayStats) -> None:
        """Add ``other``'s counts to these."""
        self.referenced += other.referenced
        self.referenced_bytes += other.referenced_bytes
        self.whole_files += other.whole_files
        self.inlined += other.inlined
        self.inlined_bytes += other.inlined_bytes
        self.missing += other.missing
        self.urls |= other.urls


def array_stats(array: RefArray) -> ArrayStats:
    """Count the chunks of ``array``: referenced (and their bytes), inlined, missing."""
    stats = ArrayStats()
    for block in array.manifest.iter_written_blocks():
        ids = block.path_id
        present = ids >= 0
        lengths = block.length[present]
        whole = lengths == WHOLE_FILE
        stats.referenced += int(present.sum())
        stats.whole_files += int(whole.sum())
        stats.referenced_bytes += int(lengths[~whole].sum(dtype=np.uint64))
        stats.inlined += int((ids == INLINED).sum())
        stats.inlined_bytes += sum(len(data) for data in block.inlined.values())
        stats.urls.update(block.paths[int(i)] for i in np.unique(ids[present]))
    # blocks in which nothing was written are skipped in a sparse manifest
    stats.missing = array.manifest.nchunks - stats.referenced - stats.inlined
    return stats
