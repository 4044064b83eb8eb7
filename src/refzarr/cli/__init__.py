"""The ``refzarr`` command: scan, inspect, validate, convert and expand reference sets, thin
over the public API. Each subcommand is a module of this package with ``register`` and ``run``."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from refzarr import __version__
from refzarr.cli import cat, convert, expand, info, refresh, scan, validate
from refzarr.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError
from refzarr.errors import RefzarrError

__all__ = ["main"]

_COMMANDS = (scan, info, validate, refresh, cat, convert, expand)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``refzarr`` command.

    Parameters
    ----------
    argv
        Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit status: 0 on success, 1 on a failure (one line on stderr, no traceback
        unless ``--debug``), 2 on a usage error.
    """
    args = _parser().parse_args(argv)
    try:
        status: int = args.run(args)
    except KeyboardInterrupt:
        print("refzarr: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``refzarr info ... | head``): not an error
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:  # every failure becomes one line (the traceback on --debug)
        if args.debug:
            traceback.print_exc()
        print(f"refzarr: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILURE
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises no second error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line; the exception type too when it is not ours."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if isinstance(exc, RefzarrError | OSError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text} (run with --debug for the traceback)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refzarr",
        description="Scan archival files into kerchunk reference sets (JSON, Parquet); "
        "inspect, validate, convert and expand reference sets.",
    )
    parser.add_argument("--version", action="version", version=f"refzarr {__version__}")
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    # --debug after the command works too; SUPPRESS keeps it from resetting the one before
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="print tracebacks of errors"
    )
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.register(commands, common)
    return parser
