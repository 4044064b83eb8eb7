"""Combining scanned groups as they arrive, a batch at a time, so that scanning and combining
an archive holds a batch of groups instead of every file's group.

Each full batch (`FOLD_SIZE` groups, in input order) is combined into a partial result at
once; the partials are combined at the end, as `refzarr.parallel.scan_and_combine`'s tree
combines them on a cluster. That gives what one combine of every group gives when the files
agree on what makes a combine depend on its grouping: the same variables, the concatenation
dimensions present in every file, and the same attributes on each dimension's coordinate
variable (no CF times to re-encode); coordinates taken from the data. Otherwise, and when
any combine of a batch or of the partials fails, every group is combined at once as before:
the result, or the error and the files it names, are the plain combine's. For that, each
batch is also kept pickled and compressed (about 150 bytes per small netCDF file instead of
about 22 KB for its group).
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Mapping
from typing import Any

from refzarr.combine import combine
from refzarr.combine.keys import dim_length, find_array
from refzarr.combine.sets import structure
from refzarr.combine.specs import FromData, parse_coord_specs
from refzarr.gcpause import gc_paused
from refzarr.model import RefArray, RefGroup
from refzarr.model.manifest import trusted_pickling

__all__ = ["FOLD_SIZE", "CombineFold"]

FOLD_SIZE = 1000
"""Groups combined per batch: small against an archive, large enough that the partial
results are few (combining 1,000 small files' groups takes about 0.1 s)."""


class CombineFold:
    """`refzarr.combine` of groups handed over one by one in input order (`add`), combined
    in batches as they come when that gives the same result (see the module's docstring).

    Parameters
    ----------
    combine_kwargs
        Keyword arguments of `refzarr.combine.combine` (``concat_dims`` at least; not
        ``urls``: each group's URL is given to `add`).
    size
        Groups per batch (at least 2; default `FOLD_SIZE`).
    """

    def __init__(self, combine_kwargs: Mapping[str, Any], size: int | None = None) -> None:
        size = FOLD_SIZE if size is None else size
        if size < 2:
            raise ValueError(f"a fold's batches need at least 2 groups, got {size}")
        if "urls" in combine_kwargs:
            raise TypeError("CombineFold takes each group's URL in add(), not urls=")
        self.kwargs = dict(combine_kwargs)
        self.size = size
        self.urls: list[str] = []
        self.first: RefGroup | None = None
        self.structures: set[tuple[Any, ...]] = set()
        self._dims = _concat_dims(self.kwargs)
        self._folding = _foldable(self.kwargs, self._dims)
        self._signature: tuple[Any, ...] | None = None
        self._batch: list[RefGroup] = []
        self._partials: list[RefGroup] = []
        self._kept: list[bytes | list[RefGroup]] = []  # every batch: packed while folding

    def __len__(self) -> int:
        return len(self.urls)

    @property
    def folded(self) -> bool:
        """Whether the groups are being combined in batches (so far)."""
        return self._folding and bool(self._partials)

    def add(self, url: str, group: RefGroup) -> None:
        """Take the next group (of file ``url``); combine the batch once it is full."""
        self.urls.append(url)
        self.structures.add(structure(group))
        if self.first is None:
            self.first = group
            self._signature = _signature(group, self._dims) if self._folding else None
            self._folding = self._signature is not None
        self._batch.append(group)
        if len(self._batch) >= self.size:
            self._fold_batch()

    def result(self) -> RefGroup:
        """The combined group of every group added.

        Raises
        ------
        ValueError
            No group was added.
        IncompatibleError, ...
            What `refzarr.combine.combine` raises for all the groups at once.
        """
        if not self.urls:
            raise ValueError("combine needs at least one group")
        if not self._kept:  # one batch or less: combined at once
            return self._combine_all(self._batch)
        if self._batch:
            self._fold_batch()
        if self._folding:
            partials, self._partials = self._partials, []
            try:
                return combine(partials, **self.kwargs)
            except Exception:  # the plain combine says what is wrong, naming the files
                del partials
        return self._combine_all(self._unkept())

    # -- batches ------------------------------------------------------------------------------

    def _fold_batch(self) -> None:
        batch, self._batch = self._batch, []
        if not self._folding:  # all combined at once in the end: packing would only cost
            self._kept.append(batch)
            return
        self._kept.append(_packed(batch))
        urls = self.urls[len(self.urls) - len(batch) :]
        if any(_signature(group, self._dims) != self._signature for group in batch):
            self._stop_folding()
            return
        try:
            self._partials.append(combine(batch, urls=urls, **self.kwargs))
        except Exception:  # raised again, as the plain combine raises it, by `result`
            self._stop_folding()

    def _stop_folding(self) -> None:
        self._folding = False
        self._partials.clear()

    def _unkept(self) -> list[RefGroup]:
        """Every group added, unpickled from the kept batches (then no longer kept)."""
        groups: list[RefGroup] = []
        kept, self._kept = self._kept, []
        with gc_paused():
            for batch in kept:
                if isinstance(batch, bytes):
                    batch = pickle.loads(zlib.decompress(batch))
                groups.extend(batch)
        return groups

    def _combine_all(self, groups: list[RefGroup]) -> RefGroup:
        return combine(groups, urls=self.urls, **self.kwargs)


def _packed(groups: list[RefGroup]) -> bytes:
    """``groups`` pickled (as `scan_many`'s workers send them: unpickled without checking
    their manifests again) and compressed: the groups of similar files compress 20-fold."""
    with trusted_pickling():
        payload = pickle.dumps(groups, protocol=pickle.HIGHEST_PROTOCOL)
    return zlib.compress(payload, 1)


def _concat_dims(kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    dims = kwargs.get("concat_dims", ())
    return (dims,) if isinstance(dims, str) else tuple(dims)


def _foldable(kwargs: Mapping[str, Any], dims: tuple[str, ...]) -> bool:
    """Whether combining in batches can give one combine's result for these options: along
    at least one dimension (merging alone is left whole), coordinates from the data (a
    regular expression, an attribute or a callable give values that the batches' results
    hold encoded: dates in units chosen per batch)."""
    if not dims or len(set(dims)) != len(dims):
        return False
    try:
        specs = parse_coord_specs(dims, kwargs.get("coords"))
    except (TypeError, ValueError):  # said by combine itself, as always
        return False
    return all(isinstance(s, FromData) and s.variable is None for s in specs.values())


def _signature(group: RefGroup, dims: tuple[str, ...]) -> tuple[Any, ...] | None:
    """What groups must share to be combined in batches: their variables, and per
    concatenation dimension its presence and its coordinate variable's attributes (CF time
    units alike: no re-encoding, which a batch would do into its own first file's units).
    None (never equal to a first group's) when a dimension is missing: stacking along a new
    dimension is left to one combine."""
    along = []
    for dim in dims:
        if dim_length(group, dim) is None:
            return None
        path = find_array(group, dim)
        node = None if path is None else group[path]
        along.append((path, node.meta.attributes if isinstance(node, RefArray) else None))
    return (structure(group), tuple(along))
