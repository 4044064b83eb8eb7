"""The scanner protocol, the registry of input formats with their magic-byte detectors, and the
options every scanner shares.

A format is a subpackage of `refzarr.scan` whose ``__init__`` defines ``FORMAT``, a
`ScanFormat`: its name, how to recognise its files from their first bytes (or a directory), and
where its scanner class lives. The package ``__init__`` must stay light (no import of the
format's library): detection imports every registered package, scanning imports only the
scanner of the file's format.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from refzarr.errors import MissingDependencyError
from refzarr.model import RefGroup
from refzarr.scan.coordinates import DEFAULT_COORDINATE_BYTES, check_coordinate_bytes

__all__ = [
    "BUILTIN_FORMATS",
    "ManyBuilt",
    "OnUnsupported",
    "Probe",
    "ScanFormat",
    "ScanOptions",
    "Scanner",
    "format_named",
    "registered_formats",
    "scanner_for",
    "without_members",
]

OnUnsupported = Literal["raise", "skip"]

BUILTIN_FORMATS = ("netcdf3", "tiff", "hdf4", "fits", "hdf5", "dmrpp", "grib", "zarr")
"""The format subpackages of `refzarr.scan`, in detection order (directories aside, the first
whose detector accepts a file's first bytes wins): fixed magic numbers first, then HDF5 (which
may look past a user block), then the formats found by reading further (XML, GRIB); Zarr
stores are directories."""


@runtime_checkable
class Scanner(Protocol):
    """A configured scanner: options in the constructor, one file (or store) per call.

    Scanners are immutable and picklable and keep no state between calls, so that scanning
    10,000 files is ``executor.map(scanner, urls)``.

    A scanner may also have ``scan_opened(file)``, given a `refzarr.scan.paths.LocalFile`:
    the group ``scanner(file.url)`` gives, of a plain local file `refzarr.scan` has opened to
    detect its format (its descriptor, ``os.stat`` and first bytes), so that a small file is
    opened once.
    """

    def __call__(self, url: str) -> RefGroup:
        """Reference every array of the file (or store) at ``url``."""
        ...


@dataclass(frozen=True, slots=True)
class ScanOptions:
    """The options every scanner takes; a format's scanner extends this dataclass.

    Parameters
    ----------
    storage_options
        Options of the fsspec filesystem of the scanned URLs (``{"anon": True}``, ...).
    inline_threshold
        Chunks stored in fewer bytes than this are read and held in the reference set instead
        of referenced (0: none, except what has no byte range of its own).
    on_unsupported
        ``"raise"`` (default): an array, attribute or object refzarr cannot reference raises
        `UnsupportedFeatureError` naming the file, the object and the feature. ``"skip"``: it
        is left out and listed in the result's ``skipped``.
    inline_coordinates
        Dimension coordinates (1-D arrays named like their dimension) of at most this many
        bytes, decoded, are held in the reference set (default 64 KiB); 0: referenced.
    drop_variables
        Members left out of the result, by path (``"granule_id"``, ``"geo/lat"``; a name or
        a sequence of them), as xarray's ``drop_variables``: names a file lacks are ignored.
        Recorded with the scan, so that `refzarr.refresh` leaves them out again.
    """

    storage_options: Mapping[str, Any] | None = None
    inline_threshold: int = 0
    on_unsupported: OnUnsupported = "raise"
    inline_coordinates: int = DEFAULT_COORDINATE_BYTES
    drop_variables: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_coordinate_bytes(self.inline_coordinates)
        object.__setattr__(self, "drop_variables", _member_paths(self.drop_variables))
        if isinstance(self.inline_threshold, bool) or not isinstance(self.inline_threshold, int):
            raise TypeError(f"inline_threshold must be an int, got {self.inline_threshold!r}")
        if self.inline_threshold < 0:
            raise ValueError(f"inline_threshold must be >= 0, got {self.inline_threshold}")
        if self.on_unsupported not in ("raise", "skip"):
            raise ValueError(
                f"on_unsupported must be 'raise' or 'skip', not {self.on_unsupported!r}"
            )
        if self.storage_options is not None and not isinstance(self.storage_options, Mapping):
            raise TypeError(f"storage_options must be a mapping, got {self.storage_options!r}")


def _member_paths(value: Any) -> tuple[str, ...]:
    """``drop_variables`` as a tuple of paths (a single name accepted), leading and trailing
    slashes taken off."""
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, Sequence) or not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"drop_variables must be a name or a sequence of names, got {value!r}")
    return tuple(name.strip("/") for name in names)


def without_members(group: RefGroup, paths: Sequence[str]) -> RefGroup:
    """``group`` without the members at ``paths`` (arrays or groups; paths it lacks are
    ignored), of the same class (a `ScannedGroup` keeps its ``skipped``)."""
    if not paths:
        return group
    by_parent: dict[str, set[str]] = {}
    for path in paths:
        parent, _, name = path.rpartition("/")
        by_parent.setdefault(parent, set()).add(name)
    return _pruned(group, "", by_parent)


def _pruned(group: RefGroup, prefix: str, by_parent: Mapping[str, set[str]]) -> RefGroup:
    gone = by_parent.get(prefix.rstrip("/"), set())
    members: dict[str, Any] = {}
    changed = False
    for name, member in group.members.items():
        if name in gone:
            changed = True
            continue
        if isinstance(member, RefGroup) and any(
            p == f"{prefix}{name}" or p.startswith(f"{prefix}{name}/") for p in by_parent
        ):
            pruned = _pruned(member, f"{prefix}{name}/", by_parent)
            changed = changed or pruned is not member
            member = pruned
        members[name] = member
    return dataclasses.replace(group, members=members) if changed else group


class ManyBuilt(NamedTuple):
    """What a format's ``many`` function (`ScanFormat.many`) gives `refzarr.scan_many`.

    Parameters
    ----------
    groups
        The groups it made, by position in the urls it was given (files it scanned whole
        among them).
    indexed
        The positions of those built from an index (GRIB ``.idx`` sidecars) without reading
        the file's data.
    """

    groups: dict[int, RefGroup]
    indexed: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class Probe:
    """What detection knows of a source: its first bytes, or that it is a directory.

    Parameters
    ----------
    url
        The source, as given.
    head
        Its first bytes: `HEAD_BYTES`, fewer when the file is shorter (empty for a
        directory).
    read_at
        ``read_at(offset, length)``: more bytes of the file, fewer past its end (HDF5 looks
        past user blocks); None for a directory.
    listing
        For a directory: the names of its entries (not recursive); else empty.
    """

    url: str
    head: bytes
    read_at: Callable[[int, int], bytes] | None = None
    listing: frozenset[str] = frozenset()

    @property
    def is_directory(self) -> bool:
        """Whether the source is a directory (a store) rather than a file."""
        return self.read_at is None


SHARED_OPTIONS = frozenset(f.name for f in dataclasses.fields(ScanOptions))
"""The options every scanner takes."""

HEAD_BYTES = 4096
"""Bytes of a file detection reads first (one small request for a remote file)."""


@dataclass(frozen=True, slots=True)
class ScanFormat:
    """An input format refzarr scans.

    Parameters
    ----------
    name
        Its name in ``scan(url, format=name)`` (``"hdf5"``, ``"netcdf3"``, ...).
    title
        What users call it, for messages and ``--help`` (``"HDF5 / netCDF4"``).
    detect
        ``detect(probe) -> bool``: whether a source is in this format, from its first bytes
        (or, for a store, its listing). Must not import the format's library.
    scanner
        ``"module:Class"`` of its scanner, a `ScanOptions` subclass implementing `Scanner`.
    extra
        The refzarr extra that installs its library (``"tiff"`` for ``refzarr[tiff]``), or
        None when the core dependencies suffice.
    requires
        Modules its scanner imports that an extra installs (checked to name the extra).
    options
        The names of the scanner's own options, beyond the shared `ScanOptions` (so that
        options are checked without importing the format's library).
    many
        ``"module:function"`` that `refzarr.scan_many` calls, when one of the format's own
        ``options`` is given, as ``function(urls, options) -> ManyBuilt``: the groups of
        files it builds other than one by one (GRIB from ``.idx`` sidecars), by position;
        the files it leaves out are scanned as usual. None: every file is scanned.
    """

    name: str
    title: str
    detect: Callable[[Probe], bool]
    scanner: str
    extra: str | None = None
    requires: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    many: str | None = None

    def scanner_class(self) -> type[ScanOptions]:
        """The scanner class, imported now.

        Raises
        ------
        MissingDependencyError
            When the format's library is not installed; names the ``pip install`` to run.
        """
        for module in self.requires:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                extra = f"refzarr[{self.extra}]" if self.extra else module
                raise MissingDependencyError(
                    f"scanning {self.title} files needs {module!r}, which is not installed: "
                    f"pip install '{extra}'"
                ) from exc
        module_name, _, class_name = self.scanner.partition(":")
        cls: type[ScanOptions] = getattr(importlib.import_module(module_name), class_name)
        return cls

    def many_builder(self) -> Callable[[Sequence[str], Mapping[str, Any]], ManyBuilt]:
        """The function ``many`` names, imported now (requires a ``many``)."""
        if self.many is None:
            raise ValueError(f"{self.title} files have no way of being built many at once")
        module_name, _, function = self.many.partition(":")
        builder: Callable[[Sequence[str], Mapping[str, Any]], ManyBuilt]
        builder = getattr(importlib.import_module(module_name), function)
        return builder

    def option_names(self) -> frozenset[str]:
        """The keyword options its scanner takes: the shared ones and its own ``options``."""
        return SHARED_OPTIONS | frozenset(self.options)


_REGISTRY: dict[str, ScanFormat] = {}
_ORDERED: dict[int, tuple[ScanFormat, ...]] = {}
"""`registered_formats`' answer by the registry's size, kept until `register` or a removal
changes it (asked once per scan)."""
_DEFAULT_SCANNERS: dict[ScanFormat, ScanOptions] = {}
"""Each format's scanner with no options, made once (scanners keep no state)."""


def register(scan_format: ScanFormat) -> None:
    """Add (or replace) a format; detection tries it after the built-in ones."""
    _REGISTRY[scan_format.name] = scan_format
    _ORDERED.clear()


def registered_formats() -> tuple[ScanFormat, ...]:
    """Every format refzarr scans, built-in ones first, in detection order."""
    found = _ORDERED.get(len(_REGISTRY))
    if found is not None:
        return found
    for name in BUILTIN_FORMATS:
        if name not in _REGISTRY:
            module = importlib.import_module(f"refzarr.scan.{name}")
            _REGISTRY[name] = module.FORMAT
    builtin = [_REGISTRY[name] for name in BUILTIN_FORMATS]
    ordered = (*builtin, *(f for n, f in _REGISTRY.items() if n not in BUILTIN_FORMATS))
    _ORDERED.clear()
    _ORDERED[len(_REGISTRY)] = ordered
    return ordered


def format_named(name: str) -> ScanFormat:
    """The format called ``name``.

    Raises
    ------
    ValueError
        When no format has that name; lists the names.
    """
    formats = {f.name: f for f in registered_formats()}
    try:
        return formats[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown format {name!r}; refzarr scans: {', '.join(sorted(formats))}"
        ) from None


def formats_summary() -> str:
    """``"hdf5 (HDF5 / netCDF4), netcdf3 (...), ..."`` for messages and help texts."""
    return ", ".join(f"{f.name} ({f.title})" for f in registered_formats())


def scanner_for(scan_format: ScanFormat, options: Mapping[str, Any]) -> ScanOptions:
    """The format's scanner configured with ``options``.

    Raises
    ------
    TypeError
        When an option is not one of the format's (lists them).
    MissingDependencyError
        When the format's library is not installed.
    """
    if not options:
        found = _DEFAULT_SCANNERS.get(scan_format)
        if found is None:
            found = _DEFAULT_SCANNERS[scan_format] = scan_format.scanner_class()()
        return found
    known = scan_format.option_names()
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"unknown scan options {unknown} for {scan_format.title}; "
            f"its options are {sorted(known)}"
        )
    return scan_format.scanner_class()(**options)


def all_option_names() -> frozenset[str]:
    """Options at least one registered format's scanner takes (shared ones included)."""
    names = set(SHARED_OPTIONS)
    for scan_format in registered_formats():
        names |= scan_format.option_names()
    return frozenset(names)
