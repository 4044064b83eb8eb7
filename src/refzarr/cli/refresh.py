"""``refzarr refresh REFS``: scan again the source files that changed since their scan and
rewrite the reference set atomically (the old set stays as it was on any failure)."""

from __future__ import annotations

import argparse
from typing import Any

from refzarr.cli.common import (
    EXIT_OK,
    REFS_HELP,
    UsageError,
    add_durable,
    add_lock_timeout,
    json_object,
    quiet_icechunk,
)
from refzarr.cli.table import plural

__all__ = ["register", "run"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the subcommand to ``commands`` (argparse subparsers)."""
    parser = commands.add_parser(
        "refresh",
        parents=[common],
        help="scan again the sources that changed since their scan; rewrite the set",
        description="Compare every source file with what its scan recorded (size, "
        "modification time, ETag), scan again those that changed, and replace the reference "
        "set atomically (an Icechunk repository: one new commit). Sources that vanished are "
        "named and nothing is written.",
    )
    parser.add_argument("refs", metavar="REFS", help=REFS_HELP)
    parser.add_argument(
        "--storage-options",
        type=json_object,
        metavar="JSON",
        help="fsspec options for the source files, as JSON or @FILE; also for REFS when it "
        "is a URL",
    )
    parser.add_argument(
        "--message",
        default=None,
        metavar="TEXT",
        help="Icechunk repositories: the commit message (default names the files refreshed)",
    )
    add_durable(parser)
    add_lock_timeout(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Refresh; one line per file scanned again and a summary on stdout."""
    from refzarr.formats.icechunk.reading import is_icechunk_repository
    from refzarr.sources.refresh import refresh

    options = args.storage_options
    refs_options = options if "://" in args.refs else None
    snapshot = None
    if is_icechunk_repository(args.refs, refs_options):
        quiet_icechunk(args.refs)
        from refzarr.formats.icechunk.refresh import refresh_icechunk

        if args.durable:
            raise UsageError("--durable applies to JSON and Parquet sets, not to Icechunk")

        done = refresh_icechunk(args.refs, options, refs_options=refs_options, message=args.message)
        changes, snapshot = done.changes, done.snapshot
    else:
        changes = refresh(
            args.refs,
            options,
            refs_options=refs_options,
            durable=args.durable,
            lock_timeout=args.lock_timeout,
        )
    for change in changes:
        print(f"refreshed {change}")
    scanned = f"{plural(len(changes), 'changed source')} scanned again"
    if not changes:
        print(f"{args.refs}: every source as scanned, nothing to do")
    elif snapshot is not None:
        print(f"{args.refs}: committed snapshot {snapshot} ({scanned})")
    else:
        print(f"{args.refs}: rewritten ({scanned})")
    return EXIT_OK
