"""`combine` and `merge`: many files' reference groups into one dataset.

The steps: parse the call; split the groups by the variables they hold (sets of files with
different variables are combined separately, checked to line up, then merged: `sets`); find
every file's coordinate values along each concatenation dimension (`keys`); place the files
on a grid (`layout`); build every variable group by group, concatenated (`concat`) or checked
identical (`identical`); write the combined coordinates (`coordinate`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from refzarr.combine.cftimes import reencode_times
from refzarr.combine.concat import Placement, concat_arrays
from refzarr.combine.coordinate import INLINE_CHUNK_BYTES, inlined_array
from refzarr.combine.gridmap import check_grid_mapping, grid_mapping_paths
from refzarr.combine.identical import SameSet, check_identical, fingerprint
from refzarr.combine.inputs import Inputs
from refzarr.combine.keys import DimInfo, coordinate, dim_infos
from refzarr.combine.layout import Layout, place_files
from refzarr.combine.merge import merge_inputs
from refzarr.combine.sets import partitions, reject_misaligned, reject_overlap
from refzarr.combine.specs import CoordSpecLike, parse_coord_specs
from refzarr.combine.values import read_values
from refzarr.errors import IncompatibleError
from refzarr.gcpause import gc_paused
from refzarr.model import RefArray, RefGroup
from refzarr.model.frozen import thaw_json

__all__ = ["combine", "merge"]

Compat = Literal["equals", "override"]


def combine(
    groups: Sequence[RefGroup],
    *,
    concat_dims: str | Sequence[str],
    identical_dims: Sequence[str] | None = None,
    coords: Mapping[str, CoordSpecLike] | None = None,
    urls: Sequence[str | None] | None = None,
    compat: Compat = "equals",
    storage_options: Mapping[str, Any] | None = None,
) -> RefGroup:
    """Combine the reference groups of many files into one dataset.

    Files are concatenated along dimensions they have, stacked along dimensions they lack,
    or both at once (files on a grid, e.g. time x ensemble member); files holding different
    variables are combined per variable set and then merged; ``concat_dims=[]`` only merges.
    Files are ordered by their coordinate values, which also become the combined coordinate
    variables (written as arrays with inlined chunks). Nothing is assumed: conflicts raise
    `IncompatibleError` naming the files and what differs.

    Parameters
    ----------
    groups
        One group per file (from `refzarr.scan`), or already combined groups (partial
        results of a tree reduction combine again along the same dimensions).
    concat_dims
        The dimensions to concatenate along. A dimension the files have is concatenated
        (variables without it must be identical in every file); one they lack is a new
        first dimension along which every variable but the dimension coordinates and
        ``identical_dims`` is stacked (new dimensions come first, in this order).
    identical_dims
        Variables (names or paths) expected identical in every file: taken from the first
        file after checking, never stacked (e.g. ``["lat", "lon"]`` or 2-D coordinates).
    coords
        Where each dimension's coordinate values come from (see `refzarr.combine.specs`):
        ``"data"`` (default: the variable named like the dimension, CF times decoded so
        that different epochs combine), ``("regex", PATTERN)`` / `FromRegex` on the file's
        URL, ``("attribute", NAME[, VARIABLE])`` / `FromAttribute`, a callable
        ``f(url, group)`` / `FromCallable`, or None (input order, no coordinate). A
        dimension without a coordinate variable keeps the input order.
    urls
        Each group's file URL, for regular expressions, callables and error messages
        (default: ``groups.urls`` when ``groups`` has it, as `scan_many`'s results do; else
        the one file each group references).
    compat
        ``"equals"`` (default) compares the values of variables expected identical (one
        batched read); ``"override"`` takes them from the first file unchecked.
    storage_options
        fsspec options for reading the referenced files (coordinate values, comparisons).

    Returns
    -------
    RefGroup
        The combined dataset. Its chunk grid is rectilinear along a concatenated axis when
        the files' lengths are not multiples of one chunk length (or their chunks differ):
        refzarr reads it, kerchunk JSON / Parquet cannot express it (writing raises).

    Raises
    ------
    IncompatibleError
        Duplicate or overlapping coordinate values, a hole in a grid of files, or files
        differing in dtype, codecs, fill value, CF packing attributes (``scale_factor``,
        ``add_offset``, ``_FillValue``, ``missing_value``, ``units``), dimension names,
        shapes or chunks along other dimensions, variables or groups held, or values of
        variables expected identical; sets of files holding different variables that do
        not line up along a concatenation dimension (other coordinate values, or none:
        xarray would pad with NaN, a reference set cannot).

    Examples
    --------
    >>> import refzarr  # doctest: +SKIP
    >>> groups = [refzarr.scan(f) for f in sorted(glob.glob("air_*.nc"))]  # doctest: +SKIP
    >>> ds = refzarr.combine(groups, concat_dims="time")  # doctest: +SKIP
    >>> grid = refzarr.combine(  # doctest: +SKIP
    ...     groups, concat_dims=["member", "time"], coords={"member": ("regex", r"m(\\d+)")}
    ... )
    """
    dims = _parse_dims(concat_dims)
    if urls is None:
        urls = getattr(groups, "urls", None)
    chosen = _parse_groups(groups)
    if compat not in ("equals", "override"):
        raise ValueError(f"compat must be 'equals' or 'override', got {compat!r}")
    if urls is not None and len(urls) != len(chosen):
        raise ValueError(f"urls has {len(urls)} entries for {len(chosen)} groups")
    specs = parse_coord_specs(dims, coords)
    inputs = Inputs(chosen, None if urls is None else tuple(urls), storage_options)
    with gc_paused():  # thousands of lasting objects: collections would walk the caller's too
        result = _combined(inputs, dims, specs, frozenset(identical_dims or ()), compat == "equals")
        return replace(result, sources=inputs.record)  # merged once: url_check reads it too


def _combined(
    inputs: Inputs,
    dims: tuple[str, ...],
    specs: Mapping[str, Any],
    identical: frozenset[str],
    check: bool,
) -> RefGroup:
    chosen = inputs.groups
    storage_options = inputs.storage_options
    if not dims:
        return merge_inputs(inputs, check=check)
    parts = partitions(inputs)
    if len(parts) == 1:
        return _Combination(inputs, dims, identical, check).run(specs)
    reject_overlap(inputs, parts, dims)
    runs = [
        _Combination(inputs.subset(ix, [chosen[i] for i in ix]), dims, identical, check)
        for ix in parts
    ]
    for run in runs:
        run.place(specs)
    reject_misaligned(inputs, parts, [(run.infos, run.layout.values) for run in runs], dims)
    combined = [run.build() for run in runs]
    names = tuple(f"the {len(ix)} files starting with {inputs.label(ix[0])}" for ix in parts)
    return merge_inputs(Inputs(tuple(combined), None, storage_options, names=names), check=check)


def merge(
    groups: Sequence[RefGroup],
    *,
    compat: Compat = "equals",
    storage_options: Mapping[str, Any] | None = None,
) -> RefGroup:
    """Merge groups holding different variables of one grid (``combine(concat_dims=[])``).

    Variables present in several groups must be identical (compared by value unless
    ``compat="override"``); dimensions of one name must have one length. The result has
    the first group's attributes.
    """
    return combine(groups, concat_dims=[], compat=compat, storage_options=storage_options)


def _parse_dims(concat_dims: str | Sequence[str]) -> tuple[str, ...]:
    dims = (concat_dims,) if isinstance(concat_dims, str) else tuple(concat_dims)
    if len(set(dims)) != len(dims) or not all(isinstance(d, str) and d for d in dims):
        raise ValueError(f"concat_dims must be distinct non-empty names, got {list(dims)}")
    return dims


def _parse_groups(groups: Sequence[RefGroup]) -> tuple[RefGroup, ...]:
    chosen = tuple(groups)
    if not chosen:
        raise ValueError("combine needs at least one group")
    for k, group in enumerate(chosen):
        if not isinstance(group, RefGroup):
            raise TypeError(f"groups[{k}] must be a RefGroup, got {type(group).__name__}")
    return chosen


class _Combination:
    """One combine of groups holding the same variables."""

    def __init__(
        self, inputs: Inputs, dims: tuple[str, ...], identical: frozenset[str], check: bool
    ) -> None:
        self.inputs = inputs
        self.dims = dims
        self.identical = identical
        self.check = check
        self.sets: list[SameSet] = []

    def run(self, specs: Mapping[str, Any]) -> RefGroup:
        """Place the files, then build the combined group."""
        self.place(specs)
        return self.build()

    def place(self, specs: Mapping[str, Any]) -> None:
        """Find every file's coordinate values and its place on the combined grid."""
        self.infos: list[DimInfo] = dim_infos(self.inputs, self.dims, dict(specs))
        keys = [info.keys for info in self.infos]
        self.layout: Layout = place_files(keys, len(self.inputs), self.inputs.labels)
        self.lengths = [self._length(d) for d in range(len(self.dims))]
        self.first = int(self.layout.cells.flat[0])  # "the first file": first on the grid
        self.coordinates = {
            info.path: d for d, info in enumerate(self.infos) if info.path is not None
        }
        self.bounds = self._bounds_paths()
        self.grid_mappings = grid_mapping_paths(self.inputs.groups[0].arrays())
        self._check_identical_names()

    def build(self) -> RefGroup:
        """The combined group of the placed files (values compared unless ``check`` is off)."""
        root = self._group("", list(self.inputs.groups))
        if self.check:
            inputs = self.inputs
            check_identical(self.sets, inputs.labels, inputs.storage_options, inputs.url_check)
        return self._add_coordinates(root)

    def _length(self, d: int) -> int:
        """The combined length along dimension ``d``: one file per slab."""
        _, first = np.unique(self.layout.ranks[:, d], return_index=True)
        return int(self.infos[d].keys.lengths[first].sum())

    def _check_identical_names(self) -> None:
        first = self.inputs.groups[0]
        known = {p for p, _ in first.arrays()} | {p.rsplit("/", 1)[-1] for p, _ in first.arrays()}
        unknown = sorted(self.identical - known)
        if unknown:
            raise ValueError(f"identical_dims names {unknown}, which no file holds")

    # -- groups --------------------------------------------------------------------------

    def _group(self, prefix: str, nodes: list[RefGroup]) -> RefGroup:
        names = list(nodes[0].members)
        wanted = set(names)
        for k, node in enumerate(nodes):
            if set(node.members) != wanted:
                other = sorted(set(node.members) ^ wanted)
                raise IncompatibleError(
                    f"group {prefix or '/'!r} holds different members in "
                    f"{self.inputs.labels([0])} and {self.inputs.labels([k])} ({other})"
                )
        members: dict[str, RefArray | RefGroup] = {}
        for name in names:
            path = f"{prefix}{name}"
            children = [node.members[name] for node in nodes]
            kinds = {isinstance(c, RefGroup) for c in children}
            if len(kinds) > 1:
                raise IncompatibleError(
                    f"{path!r} is a group in some files and an array in others "
                    f"({self.inputs.labels([0])})"
                )
            if isinstance(children[0], RefGroup):
                members[name] = self._group(f"{path}/", children)  # type: ignore[arg-type]
            elif path in self.coordinates:
                members[name] = self._coordinate(self.coordinates[path])
            elif (d := self._coordinate_copy(path, children)) is not None:  # type: ignore[arg-type]
                members[name] = self._coordinate(d)
            elif path in self.bounds:
                members[name] = self._bounds(path, children, self.bounds[path])  # type: ignore[arg-type]
            else:
                members[name] = self._joined(path, children)  # type: ignore[arg-type]
        return RefGroup(nodes[self.first].attributes, members)

    # -- variables -----------------------------------------------------------------------

    def _participating(self, path: str, array: RefArray) -> list[int]:
        """The concatenation dimensions (indices) a variable is concatenated along."""
        names = array.meta.dimension_names or ()
        base = path.rsplit("/", 1)[-1]
        listed = base in self.identical or path in self.identical
        dimension_coordinate = len(names) == 1 and names[0] == base
        kept = listed or dimension_coordinate or path in self.grid_mappings
        out = []
        for d, info in enumerate(self.infos):
            if info.new:
                if not kept:
                    out.append(d)
            elif info.keys.dim in names:
                if listed:
                    raise ValueError(
                        f"{path!r} is in identical_dims but has the concatenation dimension "
                        f"{info.keys.dim!r}: it cannot be identical across files"
                    )
                out.append(d)
        return out

    def _variable(self, path: str, arrays: list[RefArray]) -> RefArray:
        cells = self.layout.cells
        along = self._participating(path, arrays[0])
        others = [d for d in range(cells.ndim) if d not in along]
        reduced = cells[tuple(0 if d in others else slice(None) for d in range(cells.ndim))]
        if others:
            moved = np.moveaxis(cells, along, list(range(len(along))))
            for row in moved.reshape(max(reduced.size, 1), -1):
                if row.size > 1:
                    members = tuple(int(k) for k in row)
                    chosen = tuple(arrays[k] for k in members)
                    if self.check and path in self.grid_mappings:
                        check_grid_mapping(path, chosen, members, self.inputs.labels)
                    self.sets.append(
                        SameSet(
                            f"variable {path!r}", members, chosen, _is_coordinate(path, chosen[0])
                        )
                    )
        if not along:
            return arrays[int(reduced)]
        files = reduced.ravel()
        names = arrays[0].meta.dimension_names or ()
        new_names = tuple(self.dims[d] for d in along if self.infos[d].new)
        axes = tuple(
            new_names.index(self.dims[d])
            if self.infos[d].new
            else len(new_names) + names.index(self.dims[d])
            for d in along
        )
        placement = Placement(reduced.shape, axes, new_names)

        def describe(indices: Sequence[int]) -> str:
            return self.inputs.labels([int(files[i]) for i in indices])

        result = concat_arrays(
            [arrays[int(k)] for k in files], placement, describe, f"variable {path!r}"
        )
        for d, axis in zip(along, axes, strict=True):
            if not self.infos[d].new and result.shape[axis] != self.lengths[d]:
                raise IncompatibleError(
                    f"variable {path!r} is {result.shape[axis]} long along {self.dims[d]!r} "
                    f"but the dimension is {self.lengths[d]} long in the combined files: some "
                    f"file's variables disagree on that dimension's length"
                )
        return result

    def _joined(self, path: str, arrays: list[RefArray]) -> RefArray:
        """A variable concatenated from chunks all held in the references (inlined: GRIB's
        ``valid_time``, what ``inline_threshold`` loads) is made one regular inlined array, the
        same whatever the files' lengths and however the combine was split (a tree of partial
        combines gives one combine's result): its values need no I/O, and an uneven join
        would make an irregular grid no kerchunk writer can write. Missing chunks are joined
        as the values they read as."""
        combined = self._variable(path, arrays)
        meta = combined.meta
        manifest = combined.manifest
        if manifest.nchunks == 1 or not self._participating(path, arrays[0]):
            return combined
        if meta.dimension_names is None or meta.dtype.kind == "O" or manifest.sparse:
            return combined
        if math.prod(meta.shape) * meta.dtype.itemsize > INLINE_CHUNK_BYTES:
            return combined
        blocks = list(manifest.iter_blocks())
        if any((b.path_id >= 0).any() for b in blocks) or not any(b.inlined for b in blocks):
            return combined
        (values,) = read_values([combined], lambda _: f"variable {path!r}")
        return inlined_array(values, meta.dimension_names, thaw_json(meta.attributes), meta)

    # -- coordinates ---------------------------------------------------------------------

    def _coordinate(self, d: int) -> RefArray:
        info = self.infos[d]
        values = self.layout.values[d]
        assert values is not None
        values, attributes, template = coordinate(info, self.inputs, values, self.first)
        return inlined_array(values, info.keys.dim, attributes, template)

    def _coordinate_copy(self, path: str, arrays: list[RefArray]) -> int | None:
        """The dimension whose combined coordinate a subgroup's ``time`` is a copy of: in
        every file the same array as the file's own coordinate (what `_add_coordinates`
        writes into an ``overview_1``), so it is combined like the coordinate (re-encoded
        CF times included), not as a variable of its own."""
        folder, _, name = path.rpartition("/")
        if not folder:
            return None
        for d, info in enumerate(self.infos):
            if info.path is None or info.keys.dim != name or info.path == path:
                continue
            if all(
                _same_array(group.array_at(info.path), array)
                for group, array in zip(self.inputs.groups, arrays, strict=True)
            ):
                return d
        return None

    def _bounds_paths(self) -> dict[str, int]:
        """CF bounds of the concatenation coordinates (their ``bounds`` attribute): re-encoded
        like the coordinate, or inlined where their chunks would not join regularly."""
        out = {}
        for d, info in enumerate(self.infos):
            name = info.attributes.get("bounds")
            if info.source is not None and isinstance(name, str):
                prefix = info.source.rpartition("/")[0]
                out[f"{prefix}/{name}" if prefix else name] = d
        return out

    def _bounds(self, path: str, arrays: list[RefArray], d: int) -> RefArray:
        """CF time bounds inherit the coordinate's units (CF 7.1): when those differ between
        files, the bounds' values are read, re-encoded like the coordinate and inlined. Bounds
        whose chunks would join irregularly (a set combined before holds them as one inlined
        chunk; a file appended to it holds its own) are read and inlined too: they are small,
        and an irregular grid could not be written."""
        combined = self._variable(path, arrays)  # every check a variable gets
        if not self.infos[d].reencoded and combined.meta.is_regular:
            return combined
        dim = self.dims[d]
        if self._participating(path, arrays[0]) != [d]:
            raise IncompatibleError(
                f"variable {path!r}: the time bounds of {dim!r} must vary along {dim!r} only "
                "to be re-encoded into one unit (the files' time units differ)"
            )
        cells = self.layout.cells
        files = [
            int(k) for k in cells[tuple(slice(None) if e == d else 0 for e in range(cells.ndim))]
        ]
        values = read_values(
            [arrays[k] for k in files],
            lambda i: f"{self.inputs.label(files[i])}: {path}",
            self.inputs.storage_options,
            url_check=self.inputs.url_check,
        )
        info = self.infos[d]
        values, _ = reencode_times(
            values,
            [info.file_attributes[k] for k in files],
            lambda ks: self.inputs.labels([files[k] for k in ks]),
            f"variable {path!r}",
        )
        meta = combined.meta
        names = meta.dimension_names or ()
        joined = np.concatenate(values, axis=names.index(dim))
        return inlined_array(joined, names, thaw_json(meta.attributes), meta)

    def _add_coordinates(self, root: RefGroup) -> RefGroup:
        """Coordinates the files did not hold as variables (a regex on a new dimension): in
        the root and in every subgroup using the dimension (a GeoTIFF's ``overview_2`` opened
        alone has its ``time``)."""
        for path, d in self.coordinates.items():
            if path not in root:
                array = self._coordinate(d)
                for folder in ("", *_groups_using(root, self.dims[d])):
                    root = _put(root, f"{folder}{path}", array)
        return root


def _same_array(a: RefArray | None, b: RefArray) -> bool:
    """Whether ``a`` and ``b`` hold the same values stored the same way (same metadata and
    the same chunk entries)."""
    if a is None:
        return False
    return a is b or (a.meta == b.meta and fingerprint(a) == fingerprint(b))


def _groups_using(group: RefGroup, dim: str, prefix: str = "") -> list[str]:
    """The subgroups (``"overview_1/"``, ...) holding an array with dimension ``dim`` and no
    member named like it."""
    out = []
    for name, member in group.members.items():
        if not isinstance(member, RefGroup):
            continue
        folder = f"{prefix}{name}/"
        uses = any(
            dim in (a.meta.dimension_names or ())
            for a in member.members.values()
            if isinstance(a, RefArray)
        )
        if uses and dim not in member.members:
            out.append(folder)
        out.extend(_groups_using(member, dim, folder))
    return out


def _put(group: RefGroup, path: str, array: RefArray) -> RefGroup:
    head, _, rest = path.partition("/")
    members = dict(group.members)
    if rest:
        child = members.get(head)
        if not isinstance(child, RefGroup):
            raise IncompatibleError(f"cannot write coordinate {path!r}: {head!r} is not a group")
        members[head] = _put(child, rest, array)
    else:
        members[head] = array
    return RefGroup(group.attributes, members)


def _is_coordinate(path: str, array: RefArray) -> bool:
    """Whether ``path`` is a dimension coordinate (1-D, named like its dimension)."""
    names = array.meta.dimension_names or ()
    return len(names) == 1 and path.rsplit("/", 1)[-1] == names[0]
