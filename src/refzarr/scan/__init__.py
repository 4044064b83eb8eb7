"""Scanning: one source file (or store) -> a `RefGroup` of every array it holds.

The format is recognised from the source's first bytes (or a directory's entries), never from
its name; `refzarr.scan.base` holds the `Scanner` protocol and the registry of formats.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from refzarr.model import RefGroup
from refzarr.scan.base import (
    Probe,
    ScanFormat,
    Scanner,
    ScanOptions,
    all_option_names,
    format_named,
    registered_formats,
    scanner_for,
    without_members,
)
from refzarr.scan.detect import detect_format, detect_probe, open_local
from refzarr.scan.known import known_info
from refzarr.scan.paths import plain_local_path
from refzarr.scan.result import ScannedGroup, Skipped
from refzarr.sources.record import record_scan
from refzarr.sources.state import (
    SourceState,
    is_local,
    scanned_remote,
    scanned_state,
    stat_state,
)

__all__ = [
    "ScanFormat",
    "ScanOptions",
    "ScannedGroup",
    "Scanner",
    "Skipped",
    "make_scanner",
    "registered_formats",
    "scan",
]


def scan(url: str | os.PathLike[str], *, format: str | None = None, **options: Any) -> RefGroup:
    """Reference every array of one file (or Zarr store), as a virtual Zarr hierarchy.

    Parameters
    ----------
    url
        A local path (str or path object) or an fsspec URL (``s3://bucket/file.nc``,
        ``memory://x.h5``, ...); a directory is scanned as a Zarr store.
    format
        The format's name (``"hdf5"``, ``"netcdf3"``, ``"zarr"``, ...; see
        `registered_formats`). None (default): recognised from the first bytes.
    **options
        Options of the format's scanner: those every scanner takes (`ScanOptions`:
        ``storage_options``, ``inline_threshold``, ``on_unsupported``,
        ``inline_coordinates``) and the format's own (e.g. `Hdf5Scanner`'s
        ``contiguous_chunk_bytes``).

    Returns
    -------
    RefGroup
        A `ScannedGroup`: also lists, in ``skipped``, what ``on_unsupported="skip"`` left out.
        Its ``sources`` record the size, modification time and ETag of every file it refers
        to, taken as the scan began (written with the references; see `check_sources`).

    Raises
    ------
    ScanError
        When the source is in no format refzarr scans (the message lists them and shows the
        first bytes), or is corrupt or truncated.
    UnsupportedFeatureError
        When a feature the source uses cannot be referenced (names file, array, feature).
    SourceNotFoundError
        When the source does not exist.
    MissingDependencyError
        When the format's library is not installed (names the ``pip install`` to run).
    TypeError
        When an option is not one of the format's.
    """

    name = os.fspath(url)
    if format is None and plain_local_path(name, options.get("storage_options")) is not None:
        return _scan_local(name, options)
    scan_format, scanner = _configured(name, format, options)
    before, info = _state_before(name, options.get("storage_options"))
    with known_info(name, info):
        group = scanner(name)
    group = without_members(group, getattr(scanner, "drop_variables", ()))
    return record_scan(group, name, scan_format.name, scanner, before)


def _state_before(
    name: str, storage_options: Any
) -> tuple[SourceState | None, Mapping[str, Any] | None]:
    """The record's state of the file about to be scanned, and fsspec's info of a remote one
    (handed to the scanner's open: one HEAD request per file, not two)."""
    if is_local(name):
        return scanned_state(name), None
    return scanned_remote(name, storage_options)


def _scan_local(name: str, options: dict[str, Any]) -> RefGroup:
    """`scan` of a plain local path whose format is to be detected: the file is opened, stat-ed
    and its first bytes read once, for detection, the scanner (when it has ``scan_opened``)
    and the record of sources (a small file's scan is a few hundred microseconds: these
    would add a fifth)."""
    probe, file = open_local(name)
    try:
        scan_format, scanner = _configured(name, None, options, probe)
        if file is not None and _stat_is_recorded(name):
            before = stat_state(file.stat)
        else:
            before = scanned_state(name)
        scan_opened = None if file is None else getattr(scanner, "scan_opened", None)
        group = scanner(name) if scan_opened is None else scan_opened(file)
        group = without_members(group, getattr(scanner, "drop_variables", ()))
    finally:
        if file is not None:
            os.close(file.fd)
    shown = file.absolute if file is not None and file.path == name else None  # = opened_path(name)
    return record_scan(group, name, scan_format.name, scanner, before, shown)


def _stat_is_recorded(name: str) -> bool:
    """Whether the file `open_local` stat-ed for ``name`` is the one the record of sources
    names (`refzarr.sources.state.local_path`, which makes the path absolute as text): so
    unless ``name`` starts with ``~`` (not expanded there) or holds ``..`` (which a symbolic
    link may resolve elsewhere)."""
    return not name.startswith("~") and "/../" not in f"/{name}/"


def make_scanner(
    url: str | os.PathLike[str] | None = None, *, format: str | None = None, **options: Any
) -> Scanner:
    """The configured scanner `scan` would use for ``url`` (or for ``format``).

    Options that another installed format takes but this one does not are dropped, so
    that one set of options serves a folder of files in several formats; an option no
    format takes raises TypeError.
    """
    return _configured(url, format, options)[1]


def _configured(
    url: str | os.PathLike[str] | None,
    format: str | None,
    options: dict[str, Any],
    probe: Probe | None = None,
) -> tuple[ScanFormat, Scanner]:
    if format is not None:
        scan_format = format_named(format)
    elif probe is not None:
        scan_format = detect_probe(probe)
    else:
        if url is None:
            raise TypeError("make_scanner needs a url or a format")
        scan_format = detect_format(os.fspath(url), options.get("storage_options"))
    own = scan_format.option_names() if options else frozenset()
    others = set(options) - own
    if format is None and others:  # options of other formats: fine for a mixed folder
        unknown = sorted(others - all_option_names())
        if unknown:
            raise TypeError(
                f"unknown scan options {unknown}; the options are {sorted(all_option_names())}"
            )
        options = {k: v for k, v in options.items() if k in own}
    scanner: Scanner = scanner_for(scan_format, options)  # type: ignore[assignment]
    return scan_format, scanner
