"""``refzarr info REFS``: a human summary of a reference set (groups, arrays, chunks, bytes)."""

from __future__ import annotations

import argparse
from typing import Any

from refzarr.cli.common import EXIT_OK, REFS_HELP, add_storage_options, read_refs
from refzarr.cli.stats import ArrayStats, array_stats
from refzarr.cli.table import human_bytes, plural, table
from refzarr.model import ArrayMeta

__all__ = ["register", "run"]

HEADER = (
    "array",
    "dims",
    "shape",
    "chunks",
    "dtype",
    "codecs",
    "referenced",
    "bytes",
    "inlined",
    "missing",
)
NUMERIC = frozenset({"referenced", "bytes", "inlined", "missing"})


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the subcommand to ``commands`` (argparse subparsers)."""
    parser = commands.add_parser(
        "info", parents=[common], help="summarise the groups and arrays of a reference set"
    )
    parser.add_argument("refs", metavar="REFS", help=REFS_HELP)
    add_storage_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the summary: totals first, then one row per array."""
    group = read_refs(args.refs, args.storage_options)
    arrays = [(path, array.meta, array_stats(array)) for path, array in group.arrays()]
    total = ArrayStats()
    for _, _, stats in arrays:
        total.add(stats)
    groups = [path for path, _ in group.groups() if path]
    print(
        f"{args.refs}: {len(groups) + 1} group(s), {len(arrays)} array(s), "
        f"{len(total.urls):,} unique URL(s)"
    )
    print(_totals(total))
    if groups:
        print("groups: " + ", ".join(groups))
    if arrays:
        print(table(HEADER, (_cells(path, meta, stats) for path, meta, stats in arrays), NUMERIC))
    return EXIT_OK


def _totals(total: ArrayStats) -> str:
    referenced = (
        f"referenced: {plural(total.referenced, 'chunk')}, "
        f"{human_bytes(total.referenced_bytes)} in {plural(len(total.urls), 'file')}"
    )
    if total.whole_files:
        referenced += f" (+ {plural(total.whole_files, 'whole-file reference')})"
    inlined = f"inlined: {plural(total.inlined, 'chunk')}, {human_bytes(total.inlined_bytes)}"
    return f"{referenced}; {inlined}; missing: {plural(total.missing, 'chunk')}"


def _cells(path: str, meta: ArrayMeta, stats: ArrayStats) -> list[str]:
    codecs = ", ".join(str(codec["id"]) for codec in meta.codecs) or "-"
    dims = ", ".join(meta.dimension_names) if meta.dimension_names else "-"
    return [
        path,
        dims,
        str(meta.shape),
        _chunks(meta),
        str(meta.dtype),
        codecs,
        f"{stats.referenced:,}",
        human_bytes(stats.referenced_bytes),
        f"{stats.inlined:,}",
        f"{stats.missing:,}",
    ]


def _chunks(meta: ArrayMeta) -> str:
    """The chunk shape; an irregular axis as ``min..max`` of its chunk lengths."""
    if meta.rectilinear is None:
        return str(meta.chunks)
    parts = []
    for chunk, axis in zip(meta.chunks, meta.rectilinear, strict=True):
        if axis is None:
            parts.append(str(chunk))
        else:
            parts.append(f"{min(axis.sizes)}..{max(axis.sizes)}")
    return "(" + ", ".join(parts) + (",)" if len(parts) == 1 else ")")
