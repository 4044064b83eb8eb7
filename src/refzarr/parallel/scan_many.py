"""`scan_many`: many files scanned in batches on a pool or a cluster, results in input order."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from refzarr.model import RefGroup
from refzarr.parallel.batches import (
    BatchScanner,
    Failed,
    OnError,
    Outcome,
    batch_size,
    check_options,
    split,
)
from refzarr.parallel.progress import scan_progress
from refzarr.parallel.results import ScanFailure, ScanResults
from refzarr.parallel.runners import open_runner

__all__ = ["ScanPlan", "plan_scans", "scan_many"]


def scan_many(
    urls: Iterable[str | os.PathLike[str]],
    *,
    executor: Any = None,
    on_error: OnError = "raise",
    progress: bool | None = None,
    batch_size: int | None = None,
    **scan_options: Any,
) -> ScanResults:
    """Scan many files, in parallel, into one `RefGroup` each (in input order).

    Parameters
    ----------
    urls
        Local paths or fsspec URLs.
    executor
        Where the scans run:

        - None (default): a process pool of one worker per CPU this process may use; fewer
          than 32 files, or one CPU, are scanned in this process;
        - ``"processes"``, ``"threads"``, ``"serial"``: a pool made (and shut down) here, or
          this process. HDF5 scans hold h5py's global lock, so threads help only with
          remote files;
        - a `concurrent.futures.Executor`: used as is, not shut down;
        - a ``dask.distributed.Client``: the scans run as tasks of its cluster.
    on_error
        ``"raise"`` (default): the first failure seen is raised (its message names the file)
        and the work not yet started is cancelled. ``"skip"``: failed files are left out of
        the result and listed in its ``errors``.
    progress
        A progress bar (tqdm, on stderr): None (default) shows it when stderr is a terminal;
        True or False force it.
    batch_size
        Files per task (default: about four tasks per worker, at most 64 files each). Tasks
        of several files cost less than one per file, which matters for small files.
    **scan_options
        Keyword arguments of `refzarr.scan` for every file (``storage_options``,
        ``inline_threshold``, ``on_unsupported``, ...); checked before any file is scanned.
        ``grib_index="auto"``: GRIB files whose ``.idx`` sidecar agrees with a scanned file of
        the same layout are built from it without reading their messages (see
        `refzarr.scan.grib.index`; the others are scanned).

    Returns
    -------
    ScanResults
        A sequence of the groups (``urls`` names each one's file) and ``errors``, a list of
        ``(url, message)`` for the files skipped.

    Raises
    ------
    RefzarrError, OSError
        With ``on_error="raise"``, the first failure (the message names the file).
    TypeError, ValueError
        Unknown or invalid scan options, an unknown ``executor`` or ``on_error``.

    Examples
    --------
    >>> groups = refzarr.scan_many(sorted(glob.glob("data/*.nc")))  # doctest: +SKIP
    >>> with distributed.Client("tcp://scheduler:8786") as client:  # doctest: +SKIP
    ...     groups = refzarr.scan_many(urls, executor=client, on_error="skip")
    ...     print(groups.errors)
    """
    plan = plan_scans(urls, on_error, batch_size, scan_options)
    groups: list[RefGroup] = []
    urls_done: list[str] = []
    errors: list[ScanFailure] = []
    for url, outcome in plan.outcomes(executor, progress):
        if isinstance(outcome, Failed):
            errors.append(ScanFailure(outcome.url, outcome.message))
        else:
            groups.append(outcome)
            urls_done.append(url)
    return ScanResults(tuple(groups), tuple(urls_done), tuple(errors), plan.indexed_urls)


@dataclass(frozen=True)
class ScanPlan:
    """The files of one `scan_many` call, checked, with the groups built at once (GRIB
    ``.idx`` sidecars) by position; `outcomes` scans the rest."""

    names: list[str]
    on_error: OnError
    batch_size: int | None
    options: dict[str, Any]
    built: dict[int, RefGroup]
    indexed: set[int]

    @property
    def indexed_urls(self) -> tuple[str, ...]:
        """The files built from an index, in input order."""
        return tuple(self.names[k] for k in sorted(self.indexed))

    def outcomes(self, executor: Any, progress: bool | None) -> Iterator[tuple[str, Outcome]]:
        """Every file's ``(url, group or Failed)`` in input order, each as soon as it and
        every file before it are done (batches complete in any order: those that come early
        wait). With ``on_error="raise"``, the first failure seen is raised as it arrives.
        Iterate once: the groups built at once are handed over, not kept."""
        names, built = self.names, self.built
        rest = [name for k, name in enumerate(names) if k not in built]
        scanner = BatchScanner(self.options, self.on_error)
        with open_runner(executor if rest else "serial", len(rest)) as runner:
            size = self.batch_size or (
                1 if runner.workers == 1 else _default_size(rest, runner.workers)
            )
            batches = split(rest, size)
            with (
                scan_progress(progress, names) as bar,
                closing(runner.run(scanner, batches)) as arriving,
            ):
                bar.update(len(built))
                waiting: dict[int, list[Outcome]] = {}
                scanned: Iterator[Outcome] = iter(())
                following = 0  # the next batch to hand out
                for position, name in enumerate(names):
                    if position in built:
                        yield name, built.pop(position)
                        continue
                    outcome = next(scanned, None)
                    while outcome is None:  # the next batch, once it has arrived
                        while following not in waiting:
                            index, done = next(arriving)
                            if self.on_error == "raise" and done and isinstance(done[-1], Failed):
                                raise done[-1].exception()
                            waiting[index] = done
                            bar.update(len(done))
                        scanned = iter(waiting.pop(following))
                        following += 1
                        outcome = next(scanned, None)
                    yield name, outcome


def plan_scans(
    urls: Iterable[str | os.PathLike[str]],
    on_error: OnError,
    batch_size: int | None,
    scan_options: dict[str, Any],
) -> ScanPlan:
    """`scan_many`'s arguments checked (before any file is scanned) and the groups that
    formats build other than file by file built.

    Raises
    ------
    TypeError, ValueError
        As `scan_many` documents.
    """
    names = [os.fspath(url) for url in urls]
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    check_options(scan_options)
    if "data_url" in scan_options:
        from refzarr.scan.dmrpp.locate import check_shared_data_url

        check_shared_data_url(scan_options["data_url"], len(names))
    built, indexed = _built_at_once(names, scan_options)
    return ScanPlan(names, on_error, batch_size, dict(scan_options), built, indexed)


def _built_at_once(
    names: list[str], options: dict[str, Any]
) -> tuple[dict[int, RefGroup], set[int]]:
    """The groups that formats build other than file by file (`ScanFormat.many`: GRIB from
    ``.idx`` sidecars), by position, when one of their own options is given; and the
    positions of those built from an index."""
    from refzarr.scan.base import format_named, registered_formats

    chosen = options.get("format")
    formats = registered_formats() if chosen is None else (format_named(chosen),)
    built: dict[int, RefGroup] = {}
    indexed: set[int] = set()
    for scan_format in formats:
        if scan_format.many is None or not set(options) & set(scan_format.options):
            continue
        left = [k for k in range(len(names)) if k not in built]
        got = scan_format.many_builder()([names[k] for k in left], options)
        built.update({left[j]: group for j, group in got.groups.items()})
        indexed.update(left[j] for j in got.indexed)
    return built, indexed


def _default_size(names: list[str], workers: int) -> int:
    return batch_size(len(names), workers)
