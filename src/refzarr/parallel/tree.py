"""Archives larger than one machine: per-file scans as dask.distributed tasks and a tree
reduction of `refzarr.combine`, so no partial result ever passes through the client. On one
machine (any other executor), the groups are combined in this process in batches as they
arrive (`refzarr.parallel.fold`).

Leaves scan a batch of files and combine them; each level above combines ``fanin`` results of
the level below, on the workers, until one is left. The client holds only futures, then the
final group. Upper levels take coordinates from the coordinate variables the leaves wrote
(the leaves may take them from the URL, an attribute, a callable).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from refzarr.model import RefGroup
from refzarr.parallel.batches import BatchScanner, Failed, batch_size, check_options, split
from refzarr.parallel.runners import is_dask_client

__all__ = ["scan_and_combine"]


def scan_and_combine(
    urls: Iterable[str | os.PathLike[str]],
    client: Any,
    combine_kwargs: Mapping[str, Any],
    *,
    fanin: int = 8,
    batch_size: int | None = None,
    **scan_options: Any,
) -> RefGroup:
    """Scan and combine many files: on a dask.distributed cluster by a tree reduction, else
    in batches in this process as the scans arrive; either way without holding every file's
    group at once.

    Parameters
    ----------
    urls
        The files (paths or fsspec URLs the workers can reach).
    client
        A ``distributed.Client``; or where `scan_many` runs the scans (None, ``"processes"``,
        ``"threads"``, ``"serial"``, a `concurrent.futures.Executor`): then this process
        combines the groups in batches as they arrive, holding about a batch of groups at a
        time instead of every file's (`refzarr.parallel.fold.CombineFold`: the same result
        and errors as one combine of them all).
    combine_kwargs
        Keyword arguments of `refzarr.combine.combine` (``concat_dims`` at least). On a
        cluster, ``coords`` and ``urls`` apply at the leaves; the levels above read the
        combined coordinates. In this process, ``urls`` is not taken (each group's file is
        known).
    fanin
        Partial results combined per task above the leaves (at least 2; cluster only).
    batch_size
        Files per leaf task (default: about four tasks per worker thread, at most 64 files).
    **scan_options
        Keyword arguments of `refzarr.scan` for every file.

    Returns
    -------
    RefGroup
        The combined dataset.

    Raises
    ------
    RefzarrError, OSError
        The first failure: a file that cannot be scanned (named), or files that cannot be
        combined (`IncompatibleError` naming them).

    Examples
    --------
    >>> with distributed.Client("tcp://scheduler:8786") as client:  # doctest: +SKIP
    ...     group = scan_and_combine(urls, client, {"concat_dims": ["time"]})
    >>> refzarr.write(group, "s3://bucket/archive.parq")  # doctest: +SKIP
    """
    names = [os.fspath(url) for url in urls]
    if not names:
        raise ValueError("scan_and_combine needs at least one file")
    if fanin < 2:
        raise ValueError(f"fanin must be at least 2, got {fanin}")
    if "concat_dims" not in combine_kwargs:
        raise TypeError("combine_kwargs needs 'concat_dims' (e.g. {'concat_dims': ['time']})")
    if not is_dask_client(client):
        return _folded(names, client, combine_kwargs, batch_size, scan_options)
    check_options(scan_options)
    workers = max(1, sum(client.nthreads().values()))
    size = batch_size or _leaf_size(len(names), workers)
    leaf = _Leaf(BatchScanner(scan_options, "raise"), dict(combine_kwargs))
    node = _Node({k: v for k, v in combine_kwargs.items() if k not in ("coords", "urls")})
    level = [client.submit(leaf, batch, pure=False) for batch in split(names, size)]
    every = list(level)
    try:
        while len(level) > 1:
            level = [
                client.submit(node, *level[i : i + fanin], pure=False)
                for i in range(0, len(level), fanin)
            ]
            every += level
        result = level[0].result()
    finally:
        client.cancel(every)
    if not isinstance(result, RefGroup):
        raise TypeError(f"the reduction returned {type(result).__name__}, not a RefGroup")
    return result


def _folded(
    names: list[str],
    executor: Any,
    combine_kwargs: Mapping[str, Any],
    batch_size: int | None,
    scan_options: dict[str, Any],
) -> RefGroup:
    """Scanned by `scan_many`'s machinery on ``executor``, combined here as they come."""
    from refzarr.parallel.fold import CombineFold
    from refzarr.parallel.scan_many import plan_scans

    plan = plan_scans(names, "raise", batch_size, scan_options)
    fold = CombineFold({k: v for k, v in combine_kwargs.items() if k != "urls"})
    for url, outcome in plan.outcomes(executor, None):
        assert not isinstance(outcome, Failed)  # raised by `outcomes` (on_error="raise")
        fold.add(url, outcome)
    return fold.result()


def _leaf_size(count: int, workers: int) -> int:
    return batch_size(count, workers)


@dataclass(frozen=True, slots=True)
class _Leaf:
    """A leaf task: scan a batch of files, combine them (raise on the first failure)."""

    scanner: BatchScanner
    combine_kwargs: Mapping[str, Any]

    def __call__(self, urls: list[str]) -> RefGroup:
        from refzarr.combine import combine

        groups: list[RefGroup] = []
        for outcome in self.scanner(urls):
            if isinstance(outcome, Failed):
                raise outcome.exception()
            groups.append(outcome)
        if len(groups) == 1:
            return groups[0]
        return combine(groups, **{"urls": urls, **self.combine_kwargs})


@dataclass(frozen=True, slots=True)
class _Node:
    """A task above the leaves: combine partial results (coordinates from their data)."""

    combine_kwargs: Mapping[str, Any]

    def __call__(self, *partials: RefGroup) -> RefGroup:
        from refzarr.combine import combine

        return combine(list(partials), **self.combine_kwargs)
