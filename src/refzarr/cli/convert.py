"""``refzarr convert SRC DST``: read any reference set and write it anew (JSON, Parquet, or
into an Icechunk repository)."""

from __future__ import annotations

import argparse
from typing import Any

from refzarr.cli.common import (
    EXIT_OK,
    UsageError,
    add_durable,
    add_lock_timeout,
    format_of,
    positive_int,
    quiet_icechunk,
    read_refs,
)
from refzarr.formats.api import DEFAULT_RECORD_SIZE, write

__all__ = ["register", "run"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the subcommand to ``commands`` (argparse subparsers)."""
    parser = commands.add_parser(
        "convert", parents=[common], help="read a reference set and write it anew"
    )
    parser.add_argument("src", metavar="SRC", help="reference set to read")
    parser.add_argument("dst", metavar="DST", help="where to write (format from the suffix)")
    parser.add_argument(
        "--format",
        choices=["json", "parquet", "icechunk"],
        help="override the suffix; icechunk: DST is an Icechunk repository (a local path or "
        "s3://bucket/prefix), created when absent, and the references are committed to it",
    )
    parser.add_argument("--message", help="the Icechunk commit message")
    parser.add_argument("--version", type=int, choices=[0, 1], help="JSON version (default 0)")
    parser.add_argument(
        "--record-size",
        type=positive_int,
        metavar="N",
        help=f"Parquet references per record file (default {DEFAULT_RECORD_SIZE})",
    )
    add_durable(parser)
    add_lock_timeout(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Convert; the output format is checked before the (maybe long) read."""
    chosen = "icechunk" if args.format == "icechunk" else format_of(args.dst, args.format)
    if chosen != "json" and args.version is not None:
        raise UsageError("--version applies to JSON output only")
    if chosen != "parquet" and args.record_size is not None:
        raise UsageError("--record-size applies to Parquet output only")
    if chosen == "icechunk" and args.durable:
        raise UsageError("--durable applies to JSON and Parquet output, not to Icechunk")
    if chosen != "icechunk" and args.message is not None:
        raise UsageError("--message applies to Icechunk output only (--format icechunk)")
    _refuse_icechunk_source(args.src)
    group = read_refs(args.src)
    if chosen == "icechunk":
        from refzarr.formats.icechunk.repository import commit_icechunk

        quiet_icechunk(args.dst)
        commit_icechunk(group, args.dst, message=args.message or f"refzarr convert of {args.src}")
        return EXIT_OK
    write(
        group,
        args.dst,
        format=chosen,
        version=args.version or 0,
        record_size=args.record_size or DEFAULT_RECORD_SIZE,
        durable=args.durable,
        lock_timeout=args.lock_timeout,
    )
    return EXIT_OK


def _refuse_icechunk_source(src: str) -> None:
    """An Icechunk repository cannot be read back into references: say so, and what to do."""
    from refzarr.formats.icechunk.reading import is_icechunk_repository

    if is_icechunk_repository(src):
        raise UsageError(
            f"{src} is an Icechunk repository: refzarr cannot read its chunk references back "
            "(Icechunk gives no public access to them); convert the JSON or Parquet set it "
            "was written from, or scan the sources again"
        )
