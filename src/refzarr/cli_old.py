"""The ``refzarr`` command: inspect, convert and expand reference sets, thin over the public API."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

import numpy as np

from refzarr import __version__
from refzarr.errors import RefFormatError, RefzarrError
from refzarr.formats.api import (  # format_from_suffix: a bad DST fails before reading SRC
    DEFAULT_RECORD_SIZE,
    expand_references,
    format_from_suffix,
    read,
    write,
)
from refzarr.model import INLINED, MISSING, RefArray

__all__ = ["main"]

EXIT_OK = 0
EXIT_ERROR = 2
"""Exit status of a user error (bad input, missing file), as argparse uses for bad usage."""


class _UsageError(RefzarrError, ValueError):
    """Options that do not fit together (reported like any other user error)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``refzarr`` command.

    Parameters
    ----------
    argv
        Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit status: 0 on success, 2 on a user error (one line on stderr, no traceback).
    """
    args = _parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except (RefzarrError, OSError) as exc:
        print(f"refzarr: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refzarr",
        description="Inspect, convert and expand kerchunk reference sets (JSON v0/v1, Parquet).",
    )
    parser.add_argument("--version", action="version", version=f"refzarr {__version__}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    info = commands.add_parser("info", help="summarise the arrays of a reference set")
    info.add_argument("refs", metavar="REFS", help="reference set: JSON file or Parquet directory")
    info.set_defaults(run=_run_info)

    convert = commands.add_parser("convert", help="read a reference set and write it anew")
    convert.add_argument("src", metavar="SRC", help="reference set to read")
    convert.add_argument("dst", metavar="DST", help="where to write (format from the suffix)")
    convert.add_argument("--format", choices=["json", "parquet"], help="override the suffix")
    convert.add_argument("--version", type=int, choices=[0, 1], help="JSON version (default 0)")
    convert.add_argument(
        "--record-size",
        type=_positive_int,
        metavar="N",
        help=f"Parquet references per record file (default {DEFAULT_RECORD_SIZE})",
    )
    convert.set_defaults(run=_run_convert)

    expand = commands.add_parser("expand", help="print a reference set as Version 0 JSON")
    expand.add_argument("src", metavar="SRC", help="reference set to expand")
    expand.set_defaults(run=_run_expand)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


# -- convert ----------------------------------------------------------------------------------


def _run_convert(args: argparse.Namespace) -> int:
    chosen = args.format or _format_of(args.dst)
    if chosen == "parquet" and args.version is not None:
        raise _UsageError("--version applies to JSON output only")
    if chosen == "json" and args.record_size is not None:
        raise _UsageError("--record-size applies to Parquet output only")
    group = read(args.src)
    write(
        group,
        args.dst,
        format=chosen,
        version=args.version or 0,
        record_size=args.record_size or DEFAULT_RECORD_SIZE,
    )
    return EXIT_OK


def _format_of(dst: str) -> Literal["json", "parquet"]:
    """The output format ``dst``'s suffix names; checked before the (maybe long) read."""
    try:
        return format_from_suffix(dst)
    except RefFormatError:
        raise _UsageError(
            f"{dst}: cannot tell the output format from the suffix (.json, .json.zst, "
            ".json.gz, .parq, .parquet); pass --format json or --format parquet"
        ) from None


# -- expand -----------------------------------------------------------------------------------


def _run_expand(args: argparse.Namespace) -> int:
    refs = expand_references(args.src)
    try:
        _dump_v0(refs, sys.stdout)
    except BrokenPipeError:
        # the reader (e.g. ``| head``) went away: not an error of ours
        sys.stderr.close()
    return EXIT_OK


def _dump_v0(refs: dict[str, Any], out: TextIO) -> None:
    """Write ``refs`` as a JSON object, one key per line; bytes become ``base64:`` text."""
    out.write("{")
    separator = "\n"
    for key, value in refs.items():
        out.write(f"{separator}{json.dumps(key)}: {json.dumps(_json_value(value))}")
        separator = ",\n"
    out.write("\n}\n")


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return "base64:" + base64.standard_b64encode(value).decode("ascii")
    return value


# -- info -------------------------------------------------------------------------------------


@dataclass
class _Counts:
    """Chunk counts of one array and the URLs its references use."""

    referenced: int = 0
    inlined: int = 0
    missing: int = 0
    urls: set[str] = field(default_factory=set)


def _run_info(args: argparse.Namespace) -> int:
    group = read(args.refs)
    arrays = [(path, array, _count(array)) for path, array in group.arrays()]
    urls = set().union(*(counts.urls for _, _, counts in arrays))
    ngroups = sum(1 for _ in group.groups())
    print(f"{args.refs}: {ngroups} group(s), {len(arrays)} array(s), {len(urls):,} unique URL(s)")
    if arrays:
        print(_table(_info_cells(path, array, counts) for path, array, counts in arrays))
    return EXIT_OK


def _count(array: RefArray) -> _Counts:
    """Count the chunks of ``array`` block by block (a lazy manifest loads every block)."""
    counts = _Counts()
    for block in array.manifest.iter_blocks():
        ids = block.path_id
        present = ids >= 0
        counts.referenced += int(present.sum())
        counts.inlined += int((ids == INLINED).sum())
        counts.missing += int((ids == MISSING).sum())
        counts.urls.update(block.paths[int(i)] for i in np.unique(ids[present]))
    return counts


def _info_cells(path: str, array: RefArray, counts: _Counts) -> list[str]:
    meta = array.meta
    codecs = ", ".join(str(codec["id"]) for codec in meta.codecs) or "-"
    return [
        path,
        str(meta.shape),
        str(meta.chunks),
        str(meta.dtype),
        codecs,
        f"{counts.referenced:,}",
        f"{counts.inlined:,}",
        f"{counts.missing:,}",
    ]


_HEADER = ["array", "shape", "chunks", "dtype", "codecs", "referenced", "inlined", "missing"]
_NUMERIC = frozenset({"referenced", "inlined", "missing"})


def _table(rows: Iterator[list[str]]) -> str:
    """Rows under ``_HEADER``, columns padded; counts right-aligned."""
    cells = [_HEADER, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(_HEADER))]
    lines = []
    for row in cells:
        parts = [
            text.rjust(width) if name in _NUMERIC else text.ljust(width)
            for name, text, width in zip(_HEADER, row, widths, strict=True)
        ]
        lines.append("  " + "  ".join(parts).rstrip())
    return "\n".join(lines)
