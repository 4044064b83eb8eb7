"""``refzarr convert SRC DST``: read any reference set and write it anew (JSON or Parquet)."""

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
    parser.add_argument("--format", choices=["json", "parquet"], help="override the suffix")
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
    chosen = format_of(args.dst, args.format)
    if chosen == "parquet" and args.version is not None:
        raise UsageError("--version applies to JSON output only")
    if chosen == "json" and args.record_size is not None:
        raise UsageError("--record-size applies to Parquet output only")
    group = read_refs(args.src)
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
