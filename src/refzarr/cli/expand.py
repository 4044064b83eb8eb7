"""``refzarr expand SRC``: any reference set printed as kerchunk Version 0 JSON."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from typing import Any, TextIO

from refzarr.cli.common import EXIT_OK, add_storage_options, refs_options
from refzarr.formats.api import expand_references

__all__ = ["register", "run"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the subcommand to ``commands`` (argparse subparsers)."""
    parser = commands.add_parser(
        "expand", parents=[common], help="print a reference set as Version 0 JSON"
    )
    parser.add_argument("src", metavar="SRC", help="reference set to expand")
    add_storage_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the expanded references (a closed pipe, as under ``| head``, is not an error)."""
    refs = expand_references(args.src, refs_options(args.src, args.storage_options))
    try:
        _dump_v0(refs, sys.stdout)
    except BrokenPipeError:
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
