"""``refzarr scan URL_OR_GLOB... -o OUT``: scan files in parallel, combine them into one dataset
and write the reference set, in one go."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from refzarr.cli.common import (
    EXIT_OK,
    CommandFailed,
    UsageError,
    add_durable,
    add_lock_timeout,
    format_of,
    json_object,
    non_negative_int,
    positive_int,
    quiet_icechunk,
)
from refzarr.cli.scan_summary import appended_lengths, summary
from refzarr.cli.sources import expand_sources
from refzarr.cli.table import plural
from refzarr.combine.specs import FromRegex
from refzarr.errors import IncompatibleError, ScanError, UnsupportedFeatureError
from refzarr.formats.api import write
from refzarr.model import RefGroup
from refzarr.parallel import ScanFailure
from refzarr.parallel.batches import Failed, OnError
from refzarr.parallel.fold import CombineFold
from refzarr.parallel.scan_many import plan_scans

__all__ = ["register", "run"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the subcommand to ``commands`` (argparse subparsers)."""
    parser = commands.add_parser(
        "scan",
        parents=[common],
        help="scan files, combine them into one dataset, write the reference set",
        description="Scan files or Zarr stores (in parallel), combine them along --concat-dim "
        "when there is more than one, and write one reference set. Each source's format is "
        f"recognised from its first bytes; formats: {_formats_help()}.",
    )
    parser.add_argument(
        "sources",
        nargs="+",
        metavar="URL_OR_GLOB",
        help="files: local paths, fsspec URLs, or glob patterns of either (quote them)",
    )
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="where to write")
    parser.add_argument(
        "--format",
        choices=["json", "parquet", "icechunk"],
        help="override OUT's suffix; icechunk: OUT is an Icechunk repository, a local path "
        "or s3://bucket/prefix (created or opened; one commit on branch main)",
    )
    parser.add_argument(
        "--message", default=None, metavar="TEXT", help="the Icechunk commit message"
    )
    parser.add_argument(
        "--input-format",
        choices=_format_names(),
        metavar="NAME",
        help="scan every source as this format instead of recognising it from its first bytes "
        f"(saves one small read per remote file): {', '.join(_format_names())}",
    )
    parser.add_argument(
        "--on-unsupported",
        choices=["raise", "skip"],
        default="raise",
        help="an array or attribute refzarr cannot reference: fail (raise, the default) or "
        "leave it out and list it on stderr (skip)",
    )
    parser.add_argument(
        "--concat-dim",
        action="append",
        default=[],
        metavar="DIM",
        help="dimension to concatenate the files along (repeat, or DIM1,DIM2, for a grid)",
    )
    parser.add_argument(
        "--append-dim",
        metavar="DIM",
        help="append the scanned files to the reference set already at OUT along DIM "
        "(checked as combine checks files; OUT is replaced atomically, or created)",
    )
    parser.add_argument(
        "--identical-dim",
        action="append",
        default=[],
        metavar="DIM",
        help="dimension whose variables must be identical in every file (checked)",
    )
    parser.add_argument(
        "--coord-regex",
        action="append",
        default=[],
        metavar="DIM=REGEX",
        help="take DIM's coordinate from each file's URL: the group of REGEX named 'value' or "
        "DIM, else its first group (an integer when it is digits only)",
    )
    parser.add_argument(
        "--coord-format",
        action="append",
        default=[],
        metavar="DIM=FORMAT",
        help="read the text --coord-regex takes for DIM as a date with this strptime format "
        "(e.g. time=%%Y%%m%%d): DIM becomes a CF time coordinate xarray decodes to dates",
    )
    parser.add_argument(
        "--inline-threshold",
        type=non_negative_int,
        metavar="BYTES",
        help="keep chunks smaller than this in the reference set (default 0)",
    )
    parser.add_argument(
        "--inline-coordinates",
        type=non_negative_int,
        metavar="BYTES",
        help="hold dimension coordinates (time, lat, ...) of at most BYTES in the reference "
        "set (default 65536; 0: reference them)",
    )
    parser.add_argument(
        "--drop-variables",
        metavar="NAMES",
        action="append",
        help="leave these variables out of every file's scan (comma-separated paths, e.g. "
        "granule_id,geo/lat; repeatable; names a file lacks are ignored; refresh leaves them "
        "out again)",
    )
    parser.add_argument(
        "--grib-index",
        choices=["auto"],
        help="GRIB: build the files whose .idx sidecar agrees with a scanned file of the same "
        "layout from the sidecar (two small reads per file instead of its messages)",
    )
    parser.add_argument(
        "--data-url",
        metavar="TEMPLATE",
        help="DMR++ sidecars: the data file the chunks are in, {name} standing for the "
        "sidecar's file name without .dmrpp and {href} for its dmrpp:href (e.g. "
        "'s3://bucket/granules/{name}'; default: the sidecar's path without .dmrpp)",
    )
    parser.add_argument(
        "--check-data-file",
        action="store_true",
        help="DMR++ sidecars: check that each data file exists, is an HDF5, HDF4 or netCDF "
        "file and holds the sidecar's chunks (one size request and one small read per file); "
        "with --skip-errors, sidecars whose data file is missing are left out",
    )
    parser.add_argument(
        "--storage-options",
        type=json_object,
        metavar="JSON",
        help="fsspec options for the files, as JSON or @FILE (e.g. '{\"anon\": true}'); "
        "also for OUT when it uses the same protocol",
    )
    parser.add_argument(
        "--skip-errors",
        action="store_true",
        help="leave out files that cannot be scanned (listed on stderr) instead of failing",
    )
    add_durable(parser)
    add_lock_timeout(parser)
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=positive_int, metavar="N", help="worker processes (default: one per CPU)"
    )
    where.add_argument(
        "--scheduler", metavar="ADDRESS", help="a dask.distributed scheduler to scan on"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Scan, combine, write; a summary line on stdout."""
    chosen = "icechunk" if args.format == "icechunk" else format_of(args.output, args.format)
    if chosen == "icechunk" and args.durable:
        raise UsageError("--durable applies to JSON and Parquet output, not to Icechunk")
    concat_dims = _names(args.concat_dim)
    if args.append_dim and args.append_dim not in concat_dims:  # new files join along it too
        concat_dims.append(args.append_dim)
    coords = _coord_regexes(args.coord_regex, args.coord_format, concat_dims)
    storage = args.storage_options
    urls = expand_sources(args.sources, storage)
    options: dict[str, Any] = {} if storage is None else {"storage_options": storage}
    if args.inline_threshold is not None:
        options["inline_threshold"] = args.inline_threshold
    if args.inline_coordinates is not None:
        options["inline_coordinates"] = args.inline_coordinates
    if args.input_format is not None:
        options["format"] = args.input_format
    if args.grib_index is not None:
        options["grib_index"] = args.grib_index
    if args.drop_variables:
        options["drop_variables"] = [
            name for names in args.drop_variables for name in names.split(",") if name
        ]
    if args.data_url is not None:
        from refzarr.scan.dmrpp.locate import check_shared_data_url

        try:
            check_shared_data_url(args.data_url, len(urls))
        except ValueError as exc:
            raise UsageError(f"--data-url: {exc}") from None
        options["data_url"] = args.data_url
    if args.check_data_file:
        options["check_data_file"] = True
    if args.on_unsupported != "raise":
        options["on_unsupported"] = args.on_unsupported
    on_error: OnError = "skip" if args.skip_errors else "raise"
    combine_kwargs = _combine_kwargs(concat_dims, _names(args.identical_dim), coords, storage)
    with _Executor(args) as executor:
        try:
            results = _scan(urls, executor, on_error, options, combine_kwargs)
        except UnsupportedFeatureError as exc:
            raise CommandFailed(
                f"{exc} (pass --on-unsupported skip to leave such arrays out, or "
                "--skip-errors to leave out the files)"
            ) from exc
        except ScanError as exc:  # one broken file of many (a truncated download, ...)
            if len(urls) == 1:
                raise
            raise CommandFailed(
                f"{exc} (--skip-errors leaves out the files that cannot be scanned)"
            ) from exc
    _report_skipped(results)
    if not results:
        raise CommandFailed(f"none of the {plural(len(urls), 'file')} could be scanned")
    if len(results) == 1 and not coords:  # one file's coordinate from its name is combined
        assert results.fold.first is not None
        group: RefGroup = results.fold.first
    else:
        group = _combine(results, concat_dims)
    same = storage is not None and _protocol(str(args.output)) == _protocol(urls[0])
    if chosen == "icechunk":
        from refzarr.formats.icechunk.repository import commit_written

        quiet_icechunk(str(args.output))
        message = args.message or f"refzarr scan of {plural(len(results), 'file')}"
        _, result = commit_written(
            group,
            args.output,
            message=message,
            append_dim=args.append_dim,
            storage_options=storage if same else None,
            source_options=storage,
        )
    else:
        result = write(
            group,
            args.output,
            format=chosen,
            storage_options=storage if same else None,
            append_dim=args.append_dim,
            durable=args.durable,
            lock_timeout=args.lock_timeout,
        )
    appended = appended_lengths(group, result) if args.append_dim else None
    line = summary(
        str(args.output),
        results,
        concat_dims,
        appended=appended,
        from_sidecars=args.grib_index is not None,
    )
    print(line)
    return EXIT_OK


def _names(values: Sequence[str]) -> list[str]:
    """``["time", "a,b"]`` -> ``["time", "a", "b"]``."""
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def _coord_regexes(
    values: Sequence[str], formats: Sequence[str], concat_dims: list[str]
) -> dict[str, FromRegex]:
    """``DIM=REGEX`` options (with their ``DIM=FORMAT`` date formats) as ``combine``
    coordinate specs."""
    patterns: dict[str, str] = {}
    for value in values:
        dim, pattern = _dim_option("--coord-regex", value, "REGEX", r"time=_(\d{8})")
        if dim not in concat_dims:
            raise UsageError(f"--coord-regex {value!r}: {dim!r} is not a --concat-dim")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--coord-regex {value!r}: not a regular expression: {exc}") from None
        patterns[dim] = pattern
    dates: dict[str, str] = {}
    for value in formats:
        dim, date_format = _dim_option("--coord-format", value, "FORMAT", "time=%Y%m%d")
        if dim not in patterns:
            raise UsageError(
                f"--coord-format {value!r}: there is no --coord-regex for {dim!r} (the format "
                "reads the text that --coord-regex takes from each file name)"
            )
        if "%" not in date_format:
            raise UsageError(
                f"--coord-format {value!r}: {date_format!r} is no strptime format "
                "(directives start with %: %Y%m%d, %Y-%m-%dT%H%M, ...)"
            )
        dates[dim] = date_format
    return {dim: FromRegex(p, date_format=dates.get(dim)) for dim, p in patterns.items()}


def _dim_option(option: str, value: str, what: str, example: str) -> tuple[str, str]:
    """``DIM=TEXT`` split; a UsageError naming the option otherwise."""
    dim, sep, text = value.partition("=")
    if not sep or not dim or not text:
        raise UsageError(f"{option} {value!r}: expected DIM={what}, e.g. {example}")
    return dim, text


@dataclass(frozen=True)
class _Scanned:
    """The files scanned, their groups being combined (`CombineFold`), the failures
    (``--skip-errors``), the arrays left out (``--on-unsupported skip``) and the files built
    from ``.idx`` sidecars: what the summary line and the messages on stderr say."""

    fold: CombineFold
    errors: tuple[ScanFailure, ...]
    left_out: tuple[tuple[str, str], ...]
    indexed: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.fold)

    @property
    def variable_sets(self) -> int:
        """How many sets of files holding different variables there are."""
        return len(self.fold.structures)


def _scan(
    urls: list[str],
    executor: Any,
    on_error: OnError,
    options: dict[str, Any],
    combine_kwargs: dict[str, Any],
) -> _Scanned:
    """Scan the files (as `scan_many`), each group handed to a `CombineFold` as it comes:
    batches of files combined as they come, not every file's group held until the end."""
    plan = plan_scans(urls, on_error, None, options)
    fold = CombineFold(combine_kwargs)
    errors: list[ScanFailure] = []
    left_out: list[tuple[str, str]] = []
    for url, outcome in plan.outcomes(executor, None):
        if isinstance(outcome, Failed):
            errors.append(ScanFailure(outcome.url, outcome.message))
            continue
        left_out.extend((s.path, s.reason) for s in getattr(outcome, "skipped", ()))
        fold.add(url, outcome)
    return _Scanned(fold, tuple(errors), tuple(left_out), plan.indexed_urls)


def _combine_kwargs(
    concat_dims: list[str],
    identical_dims: list[str],
    coords: dict[str, FromRegex],
    storage_options: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "concat_dims": concat_dims,
        "identical_dims": identical_dims or None,
        "coords": coords or None,
        "storage_options": storage_options,
    }


def _combine(results: _Scanned, concat_dims: list[str]) -> RefGroup:
    try:
        return results.fold.result()
    except IncompatibleError as exc:
        if concat_dims:
            raise
        raise IncompatibleError(
            f"{str(exc).rstrip('.')}.\nThe files may be pieces along a dimension: "
            f"{_concat_dim_hint(results.fold.first)}"
        ) from exc


def _concat_dim_hint(first: RefGroup | None) -> str:
    """What to pass as ``--concat-dim``: the files' unlimited dimensions where recorded."""
    from refzarr.model.attr_types import unlimited_dimensions

    unlimited = {
        name: None
        for group in ([] if first is None else [first])
        for _, array in group.arrays()
        for name in unlimited_dimensions(array.meta.attributes)
    }
    if not unlimited:
        return "name it with --concat-dim (e.g. --concat-dim time)"
    options = " ".join(f"--concat-dim {name}" for name in unlimited)
    which = "dimension" if len(unlimited) == 1 else "dimensions"
    return f"add {options} (the files' unlimited {which})"


def _protocol(url: str) -> str:
    """``s3`` for ``s3://b/k``; ``file`` for a local path."""
    return url.split("://", 1)[0] if "://" in url else "file"


def _report_skipped(results: _Scanned) -> None:
    for failure in results.errors:
        # the path once, not twice: "ScanError: <url>: why" -> "ScanError: why"
        message = re.sub(rf"^(\w+: )?{re.escape(failure.url)}: ", r"\1", failure.message)
        print(f"refzarr: skipped {failure.url}: {message}", file=sys.stderr)
    for path, reason in results.left_out:
        print(f"refzarr: left out {path}: {reason}", file=sys.stderr)


def _format_names() -> list[str]:
    from refzarr.scan import registered_formats

    return [f.name for f in registered_formats()]


def _formats_help() -> str:
    from refzarr.scan import registered_formats

    return ", ".join(f.title for f in registered_formats())


class _Executor:
    """The executor of ``--workers`` / ``--scheduler`` (None: scan_many's default), closed
    on exit."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.closing: Any = None

    def __enter__(self) -> Any:
        if self.args.scheduler:
            self.closing = _client(self.args.scheduler)
            return self.closing
        if self.args.workers == 1:
            return "serial"
        if self.args.workers:
            from refzarr.parallel.runners import process_pool

            self.closing = process_pool(self.args.workers)
            return self.closing
        return None

    def __exit__(self, *exc: object) -> None:
        if self.closing is not None:
            if hasattr(self.closing, "shutdown"):
                self.closing.shutdown(wait=True, cancel_futures=True)
            else:
                self.closing.close()


def _client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise CommandFailed("--scheduler needs dask.distributed: pip install distributed") from None
    try:
        return Client(address, timeout=30)  # type: ignore[no-untyped-call]
    except OSError as exc:
        raise CommandFailed(f"cannot reach the dask scheduler at {address}: {exc}") from exc
