"""What the subcommands of ``refzarr`` share: exit codes, usage errors, argument types."""

from __future__ import annotations

import argparse
import json
from typing import Any, Literal

from refzarr.errors import RefFormatError, RefzarrError
from refzarr.formats.api import format_from_suffix, read, source_given_error
from refzarr.formats.target_lock import DEFAULT_LOCK_TIMEOUT
from refzarr.model import RefGroup
from refzarr.sources.guard import CHECK_SOURCES

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "REFS_HELP",
    "CommandFailed",
    "UsageError",
    "add_check_sources",
    "add_durable",
    "add_lock_timeout",
    "add_storage_options",
    "format_of",
    "json_object",
    "non_negative_int",
    "positive_int",
    "read_refs",
    "refs_options",
]

EXIT_OK = 0
EXIT_FAILURE = 1
"""Something went wrong doing what was asked: missing or malformed input, a failed check."""
EXIT_USAGE = 2
"""The command line itself is wrong (argparse uses 2 for this too)."""

REFS_HELP = "reference set: JSON file (maybe .zst/.gz) or Parquet directory, path or URL"


def add_durable(parser: argparse.ArgumentParser) -> None:
    """The ``--durable`` option of the commands that write a reference set."""
    parser.add_argument(
        "--durable",
        action="store_true",
        help="flush (fsync) every file and directory of the new reference set, and its "
        "folder, to disk before and after it replaces the old one, so that it survives a "
        "power cut (local JSON files are always flushed; Parquet sets are not without it)",
    )


def add_lock_timeout(parser: argparse.ArgumentParser) -> None:
    """The ``--lock-timeout`` option of the commands that write a reference set."""
    parser.add_argument(
        "--lock-timeout",
        type=_seconds,
        default=DEFAULT_LOCK_TIMEOUT,
        metavar="SECONDS",
        help="local sets: wait at most this long while another writer of the same set holds "
        f"its lock, then fail without writing (default {DEFAULT_LOCK_TIMEOUT:g}; 'none': no "
        "limit)",
    )


def _seconds(text: str) -> float | None:
    """A lock timeout: seconds >= 0, or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"seconds >= 0 or 'none' expected, got {text!r}")
    return seconds


def add_storage_options(parser: argparse.ArgumentParser) -> None:
    """The ``--storage-options`` of the commands that read a reference set and its sources."""
    parser.add_argument(
        "--storage-options",
        type=json_object,
        metavar="JSON",
        help="fsspec options for the source files, and for REFS when it is a URL, as JSON or "
        "@FILE (credentials, '{\"anon\": true}', an S3 endpoint_url in client_kwargs)",
    )


def add_check_sources(parser: argparse.ArgumentParser) -> None:
    """The ``--check-sources`` option of the commands that read chunks of source files."""
    parser.add_argument(
        "--check-sources",
        choices=CHECK_SOURCES,
        default="local",
        help="compare each source file read with the state its scan recorded and fail if it "
        "changed (`refzarr refresh REFS` scans it again): local files (default: one stat "
        "each), all (remote files too: one metadata request each) or none",
    )


def refs_options(refs: str, storage_options: dict[str, Any] | None) -> dict[str, Any] | None:
    """``--storage-options`` for reading REFS itself: given when REFS is a URL (as the
    sources are), None for a local path."""
    return storage_options if "://" in refs else None


class UsageError(RefzarrError, ValueError):
    """Options that do not fit together: reported in one line, exit status 2."""


class CommandFailed(RefzarrError, LookupError):
    """What was asked for is not there (a key, a file); reported in one line, exit status 1."""


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    return _int_at_least(text, 0, "a non-negative integer")


def _int_at_least(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """An argparse type: a JSON object (``'{"anon": true}'``), or ``@FILE`` holding one."""
    source = text
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as f:
                source = f.read()
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]}: {exc.strerror}") from None
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object ({{...}}), got {text!r}")
    return value


def format_of(dst: str, chosen: str | None) -> Literal["json", "parquet"]:
    """The output format: ``chosen`` (``--format``), else what ``dst``'s suffix names."""
    if chosen == "json":
        return "json"
    if chosen == "parquet":
        return "parquet"
    try:
        return format_from_suffix(dst)
    except RefFormatError:
        raise UsageError(
            f"{dst}: cannot tell the output format from the suffix (.json, .json.zst, "
            ".json.gz, .parq, .parquet); pass --format json or --format parquet"
        ) from None


_REFS_MAGIC = (b"{", b"\x28\xb5\x2f\xfd", b"\x1f\x8b")
"""How a JSON reference set starts (after white space): ``{``, or a zstd / gzip stream."""


def read_refs(source: str, storage_options: dict[str, Any] | None = None) -> RefGroup:
    """The reference set at ``source`` (`refzarr.read`, with ``storage_options`` when
    ``source`` is a URL); a source file given instead (a netCDF, a TIFF, a Zarr store, ...)
    is named as such, with the ``refzarr scan`` to run
    (`refzarr.formats.api.source_given_error`), judged from its first bytes before the file
    is read (a remote file is not downloaded to find out).

    Raises
    ------
    RefFormatError
        When ``source`` is a file refzarr scans rather than a reference set.
    """
    options = refs_options(source, storage_options)
    error = _source_given(source, options)
    if error is not None:
        raise error
    return read(source, options)


def _source_given(source: str, storage_options: dict[str, Any] | None) -> RefFormatError | None:
    """`source_given_error` for the file at ``source`` from its first bytes; None for a
    directory (`refzarr.read` judges those) or a file that begins like a reference set."""
    from refzarr.scan.detect import probe_source

    try:
        probe = probe_source(source, storage_options)
    except (RefzarrError, OSError, ValueError):
        return None
    if probe.is_directory or probe.head.lstrip().startswith(_REFS_MAGIC):
        return None  # looks like a reference set: read it (errors then say what is wrong)
    return source_given_error(probe)


def quiet_icechunk(repository: str) -> None:
    """Before the CLI opens the Icechunk repository ``repository``: when it is local,
    silence Icechunk's warnings about local storage (not safe for concurrent commits...),
    printed on every command; its errors still show, and ``ICECHUNK_LOG`` wins."""
    if "://" in repository and not repository.startswith("file://"):
        return
    from refzarr.formats.icechunk.repository import quiet_local_storage_logs

    quiet_local_storage_logs()
