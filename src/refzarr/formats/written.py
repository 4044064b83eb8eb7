"""What a write put where: `WriteResult`, returned by `refzarr.write` and
`refzarr.to_icechunk`, built from the written arrays' metadata (nothing is read back)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from refzarr.model.frozen import FrozenDict
from refzarr.model.group import RefGroup

__all__ = ["WriteResult", "dimension_lengths", "written_result"]

WriteFormat = Literal["json", "parquet", "icechunk"]

ArrayShape = tuple[str, tuple[str, ...], tuple[int, ...]]
"""An array's path, dimension names and shape."""


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What a write put where (read-only, hashable, picklable).

    Parameters
    ----------
    target
        Where the set was written, as the caller named it (`refzarr.to_icechunk`: the
        group's path in the store, ``""`` for its root).
    format
        ``"json"``, ``"parquet"`` or ``"icechunk"``.
    dims
        The length of every dimension of the written arrays, as they are in the set after
        the write (after an append: the appended dimension's new length). Where arrays of a
        hierarchy give one name different lengths, the length of the array named after the
        dimension (its coordinate) wins, the shallowest first, else the shallowest array
        along it.
    references
        Chunks (referenced or inlined) of the group given to the write: all of a new set's;
        for an append, the appended data's (arrays of it found identical in the set, and
        not grown, included).
    append_dim
        The dimension appended along, when ``append_dim`` was given.
    appended
        Whether the group was appended to an existing set (False when the set was written
        anew, an ``append_dim`` given where no set was yet included).
    """

    target: str
    format: WriteFormat
    dims: Mapping[str, int] = field(default_factory=FrozenDict)
    references: int = 0
    append_dim: str | None = None
    appended: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.dims, FrozenDict):
            object.__setattr__(self, "dims", FrozenDict(self.dims))


def written_result(
    group: RefGroup,
    target: str,
    format: WriteFormat,
    *,
    written: RefGroup | Iterable[ArrayShape] | None = None,
    append_dim: str | None = None,
    appended: bool = False,
) -> WriteResult:
    """The `WriteResult` of writing ``group`` to ``target``; ``written`` the set as it is
    after the write (a combined group, or its arrays' shapes) when that is not ``group``."""
    arrays = written if written is not None else group
    shapes = _shapes(arrays) if isinstance(arrays, RefGroup) else list(arrays)
    references = sum(array.manifest.count_written() for _, array in group.arrays())
    return WriteResult(
        target=target,
        format=format,
        dims=FrozenDict(dimension_lengths(shapes)),
        references=references,
        append_dim=append_dim,
        appended=appended,
    )


def dimension_lengths(arrays: RefGroup | Iterable[ArrayShape]) -> dict[str, int]:
    """Every dimension name of ``arrays`` (a group, or arrays' paths, dimension names and
    shapes) with its length, from the array named after it, the shallowest, where there is
    one, else from the shallowest array along it (as `WriteResult.dims`)."""
    shapes = _shapes(arrays) if isinstance(arrays, RefGroup) else arrays
    best: dict[str, tuple[tuple[bool, int], int]] = {}
    for path, names, shape in shapes:
        if len(names) != len(shape):  # no dimension names
            continue
        for dim, length in zip(names, shape, strict=True):
            if not dim:
                continue
            rank = (path.rpartition("/")[2] != dim, path.count("/"))
            if dim not in best or rank < best[dim][0]:
                best[dim] = (rank, length)
    return {dim: length for dim, (_, length) in best.items()}


def _shapes(group: RefGroup) -> list[ArrayShape]:
    return [
        (path, tuple(array.meta.dimension_names or ()), array.meta.shape)
        for path, array in group.arrays()
    ]
