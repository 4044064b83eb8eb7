"""An h5py dataset whose shape, chunk shape, rank, maximum shape and header address are
asked of HDF5 once per scan.

h5py asks HDF5 again on every ``ds.chunks``, ``ds.ndim`` and ``ds.maxshape`` (several µs
each, more on a dataset just opened), and a scan asks them of each dataset a dozen times.
None of them can change while a file is open read-only (and not for SWMR reading, which the
scanner never does), as h5py itself assumes when it keeps ``ds.shape`` of such a file (behind
a lock and a dictionary look-up, on each of the thirty-odd times a scan asks).
"""

from __future__ import annotations

from functools import cached_property

import h5py

from refzarr.scan.hdf5.ohdr import header_address

__all__ = ["ScannedDataset"]


class ScannedDataset(h5py.Dataset):  # type: ignore[misc]  # h5py has no type information
    """`h5py.Dataset` of a file opened read-only, with ``shape``, ``chunks``, ``ndim``,
    ``maxshape`` and ``header_address`` read once.

    ``header_address`` may be given at once (``ds.header_address = address``) by a caller
    that knows it (from the link the dataset was opened by).
    """

    @cached_property
    def header_address(self) -> int:
        """The address of the dataset's object header (what identifies it in its file)."""
        return header_address(self.id)

    @cached_property
    def shape(self) -> tuple[int, ...] | None:
        """The current shape (None for a null dataspace)."""
        shape: tuple[int, ...] | None = super().shape
        return shape

    @cached_property
    def chunks(self) -> tuple[int, ...] | None:
        """The HDF5 chunk shape (None: not chunked)."""
        chunks: tuple[int, ...] | None = super().chunks
        return chunks

    @cached_property
    def ndim(self) -> int:
        """The number of axes (0 for a scalar or null dataspace)."""
        shape = self.shape  # h5py keeps it for a file opened read-only
        rank: int = super().ndim if shape is None else len(shape)
        return rank

    @cached_property
    def maxshape(self) -> tuple[int | None, ...] | None:
        """The largest shape the dataset may grow to (None along unlimited axes)."""
        maxshape: tuple[int | None, ...] | None = super().maxshape
        return maxshape
