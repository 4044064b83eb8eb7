"""The groups being combined, with their URLs and the names error messages give them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from refzarr.model import RefGroup

if TYPE_CHECKING:
    from refzarr.combine.values import UrlCheck
    from refzarr.io import RangeReader

__all__ = ["Inputs", "group_urls"]

_SHOWN = 3
"""Files named in one error message before "and N more"."""


@dataclass(frozen=True)
class Inputs:
    """The groups of one combine call.

    Parameters
    ----------
    groups
        The groups, in input order.
    urls
        The URL of each group's file when the caller knows it (else found in its manifests).
    parent
        For subgroups or a subset of another call's groups: that `Inputs` and, per group here,
        the index of the group it stands for there (URLs and labels come from there).
    names
        How errors name each group, when not by its file (partial results being merged).
    storage_options
        fsspec options for reading the referenced files (coordinate values, identity checks).
    """

    groups: tuple[RefGroup, ...]
    urls: tuple[str | None, ...] | None = None
    storage_options: Mapping[str, Any] | None = None
    parent: tuple[Inputs, tuple[int, ...]] | None = None
    names: tuple[str, ...] | None = None
    _found: dict[int, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.groups)

    @cached_property
    def url_check(self) -> UrlCheck | None:
        """What combine's reads (coordinate values, identity checks) call before reading
        source files: each local file compared once with the state its scan recorded
        (`SourceChangedError` when it changed since); None when no group records its sources."""
        if self.parent is not None:
            return self.parent[0].url_check
        if all(group.sources is None for group in self.groups):
            return None
        return _RecordedSources(self)

    @cached_property
    def record(self) -> dict[str, Any] | None:
        """The records of every group's sources merged (`refzarr.sources.record.
        merged_sources`): what the combined group records, and what `url_check` compares
        with; made once, when first asked."""
        if self.parent is not None:
            return self.parent[0].record
        from refzarr.sources.record import merged_sources

        return merged_sources(self.groups)

    def referenced(self, index: int) -> tuple[str, ...]:
        """The URLs group ``index`` references, in first-use order (cached)."""
        found = self._found.get(index)
        if found is None:
            found = group_urls(self.groups[index])
            self._found[index] = found
        return found

    def url(self, index: int) -> str | None:
        """The file URL of group ``index``: given, or the only one it references, or None."""
        if self.parent is not None:
            inputs, indices = self.parent
            return inputs.url(indices[index])
        if self.urls is not None and self.urls[index] is not None:
            return self.urls[index]
        found = self.referenced(index)
        return found[0] if len(found) == 1 else None

    def label(self, index: int) -> str:
        """How errors name group ``index``: its URL, or its first URL and how many more."""
        if self.names is not None:
            return self.names[index]
        if self.parent is not None:
            inputs, indices = self.parent
            return inputs.label(indices[index])
        url = self.url(index)
        if url is not None:
            return url
        found = self.referenced(index)
        if not found:
            return f"group #{index} (no referenced file)"
        return f"{found[0]} (+{len(found) - 1} more files, group #{index})"

    def labels(self, indices: Sequence[int]) -> str:
        """Several groups named for an error message (at most a few, then a count)."""
        chosen = list(dict.fromkeys(int(i) for i in indices))
        names = ", ".join(self.label(i) for i in chosen[:_SHOWN])
        more = len(chosen) - _SHOWN
        return f"{names} and {more} more" if more > 0 else names

    def subset(self, indices: Sequence[int], groups: Sequence[RefGroup]) -> Inputs:
        """Other groups (``groups[k]`` standing for input ``indices[k]``) named like these."""
        mapping = tuple(int(i) for i in indices)
        return Inputs(tuple(groups), None, self.storage_options, parent=(self, mapping))


class _RecordedSources:
    """A `refzarr.sources.guard.SourceGuard` over `Inputs.record`, made at the first read
    (merging the records costs nothing when no source file is read)."""

    def __init__(self, inputs: Inputs) -> None:
        self._inputs = inputs
        self._guard: UrlCheck | None = None

    def __call__(self, reader: RangeReader, urls: Sequence[str]) -> None:
        if self._guard is None:
            from refzarr.sources.guard import SourceGuard

            merged = self._inputs.record
            self._guard = _unchecked if merged is None else SourceGuard(merged)
        self._guard(reader, urls)


def _unchecked(reader: RangeReader, urls: Sequence[str]) -> None:
    """No record: nothing to compare."""


def group_urls(group: RefGroup) -> tuple[str, ...]:
    """Every URL the arrays of ``group`` reference, in first-use order."""
    seen: dict[str, None] = {}
    for _, array in group.arrays():
        seen.update(dict.fromkeys(array.manifest.paths))
    return tuple(seen)
