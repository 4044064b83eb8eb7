"""``refzarr validate REFS [--decode | --sources]``: every referenced byte range exists (and
decodes) and every referenced file has the size / modification time / ETag its scan recorded
(compared from the same answers, no request more), or (``--sources``) every source file the
record names is as its scan found it (REFS may then be an Icechunk repository refzarr wrote)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from refzarr.cli.checks import (
    Report,
    changed_sources,
    check_decode,
    check_ranges,
    file_states,
    referenced_urls,
    sizes_of,
)
from refzarr.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    REFS_HELP,
    UsageError,
    add_storage_options,
    positive_int,
    quiet_icechunk,
    read_refs,
    refs_options,
)
from refzarr.cli.table import plural
from refzarr.io import RangeReader
from refzarr.model import RefGroup
from refzarr.parallel.progress import progress_bar
from refzarr.sources.check import SourceChange

__all__ = ["register", "run"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the subcommand to ``commands`` (argparse subparsers)."""
    parser = commands.add_parser(
        "validate",
        parents=[common],
        help="check that every referenced byte range exists (--decode: and decodes) and "
        "that every referenced file is as scanned",
    )
    parser.add_argument("refs", metavar="REFS", help=REFS_HELP)
    parser.add_argument(
        "--decode", action="store_true", help="also fetch and decode every chunk (reads it all)"
    )
    parser.add_argument(
        "--sources",
        action="store_true",
        help="instead, check that every source file is as scanned (size, modification time, "
        "ETag): lists those that changed or vanished (refresh them with `refzarr refresh`)",
    )
    add_storage_options(parser)
    parser.add_argument(
        "--max-failures",
        type=positive_int,
        default=20,
        metavar="N",
        help="failures listed at most (default 20; all are counted)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check; list the first failures on stdout; exit status 1 when there is any."""
    from refzarr.formats.icechunk.reading import is_icechunk_repository

    if args.sources and args.decode:
        raise UsageError("--sources and --decode check different things: give one")
    if is_icechunk_repository(args.refs, _repository_options(args)):
        quiet_icechunk(args.refs)
        if not args.sources:
            raise UsageError(
                f"{args.refs} is an Icechunk repository: give --sources to check its sources "
                "(Icechunk itself checks every virtual chunk's source when reading it)"
            )
        return _run_icechunk_sources(args)
    group = read_refs(args.refs, args.storage_options)
    if args.sources:
        return _run_sources(args, group)
    arrays = list(group.arrays())
    reader = RangeReader(storage_options=args.storage_options)
    urls = referenced_urls(arrays)
    states = file_states(reader, urls)
    changes = changed_sources(group, states, args.refs)
    sizes = sizes_of(states)
    report = Report(args.max_failures)
    for path, array in arrays:
        check_ranges(path, array, sizes, report)
    decoded = 0
    if args.decode:
        total = sum(array.manifest.nchunks for _, array in arrays)
        with progress_bar(None, total, "decoding", unit="chunk") as bar:
            for path, array in arrays:
                decoded += check_decode(path, array, reader, sizes, report)
                bar.update(array.manifest.nchunks)
    checked = f"{plural(len(arrays), 'array')}, {plural(len(urls), 'file')}"
    if args.decode:
        checked += f", {plural(decoded, 'chunk')} decoded"
    if not report.count and not changes:
        print(f"{args.refs}: OK ({checked})")
        return EXIT_OK
    _print_failures(args, report, changes, len(urls))
    return EXIT_FAILURE


def _print_failures(
    args: argparse.Namespace, report: Report, changes: list[SourceChange], files: int
) -> None:
    """Changed sources, then failed checks, on stdout (at most ``--max-failures`` of each);
    one summary line on stderr."""
    for change in changes[: args.max_failures]:
        print(f"CHANGED {change}")
    for failure in report.shown:
        print(f"FAILED {failure}")
    parts = []
    if changes:
        more = len(changes) - args.max_failures
        hidden = f", {more:,} more not shown" if more > 0 else ""
        parts.append(
            f"{len(changes):,} of {plural(files, 'source file')} changed since scanned"
            f"{hidden} (`refzarr refresh {args.refs}` scans them again)"
        )
    if report.count:
        more = report.count - len(report.shown)
        suffix = f" ({more:,} more not shown; --max-failures N)" if more else ""
        parts.append(f"{plural(report.count, 'failure')}{suffix}")
    print(f"refzarr: error: {args.refs}: {'; '.join(parts)}", file=sys.stderr)


def _run_icechunk_sources(args: argparse.Namespace) -> int:
    """``--sources`` on an Icechunk repository: its record, then as `_run_sources`; chunks
    of files the record does not name (another writer's) are listed on stderr."""
    from refzarr.formats.icechunk.reading import read_icechunk_record, unrecorded_locations
    from refzarr.sources.check import required

    options = _repository_options(args)
    scans = required(read_icechunk_record(args.refs, options).scans, args.refs)
    status = _report_sources(args, scans)
    unknown = unrecorded_locations(args.refs, scans, options)
    if unknown:
        shown = ", ".join(unknown[:3]) + (", ..." if len(unknown) > 3 else "")
        print(
            f"refzarr: warning: {args.refs}: {plural(len(unknown), 'file')} referenced by "
            f"virtual chunks the record does not name (another writer's; not checked): {shown}",
            file=sys.stderr,
        )
    return status


def _repository_options(args: argparse.Namespace) -> Any:
    """``--storage-options`` serve a remote repository too (as for ``refzarr refresh``)."""
    return refs_options(args.refs, args.storage_options)


def _run_sources(args: argparse.Namespace, group: RefGroup) -> int:
    """``--sources``: one line per source file that changed, vanished or is unreachable."""
    from refzarr.sources.check import require_record

    return _report_sources(args, require_record(group, args.refs))


def _report_sources(args: argparse.Namespace, scans: list[Any]) -> int:
    from refzarr.sources.check import changes_of

    changes = changes_of(scans, args.storage_options)
    files = len({url for scan in scans for url in scan.files})
    if not changes:
        print(f"{args.refs}: OK ({plural(files, 'source file')} as scanned)")
        return EXIT_OK
    for change in changes[: args.max_failures]:
        print(
            f"CHANGED {change}" if change.kind == "changed" else f"{change.kind.upper()} {change}"
        )
    more = len(changes) - args.max_failures
    suffix = f" ({more:,} more not shown; --max-failures N)" if more > 0 else ""
    print(
        f"refzarr: error: {args.refs}: {len(changes):,} of {plural(files, 'source file')} "
        f"changed or vanished since scanned{suffix}; `refzarr refresh {args.refs}` scans them "
        "again",
        file=sys.stderr,
    )
    return EXIT_FAILURE
