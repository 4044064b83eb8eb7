"""Which file a sidecar's chunks are in, and reading bytes of it when a chunk must be inlined.

Real sidecars name their data file in ``dmrpp:href`` with a server-catalog path
(``data/x.h5``) or the placeholder ``OPeNDAP_DMRpp_DATA_ACCESS_URL``, neither of which says
where the file is for anyone else. So the data file is, in order: the scanner's ``data_url``;
(``{name}`` in it: the sidecar's file name without ``.dmrpp``; ``{href}``: its ``dmrpp:href``);
the sidecar's own URL without ``.dmrpp`` (archives publish the two side by side); the
``dmrpp:href`` when it is an absolute URL (``https://...``, ``s3://...``). A chunk's own
``href`` is used when it is an absolute URL, and stands for the data file when it is the
dataset's ``dmrpp:href`` or the placeholder; any other (relative) ``href`` is refused, since
nothing says what it is relative to. A scan reads bytes (to inline them) only of the data file
and of URLs beside it (the same scheme and host or bucket; for a local data file, that file
itself): a sidecar from a stranger would otherwise have the scan copy any file or URL the
user can reach (``file:///home/me/.aws/credentials``, a cloud metadata URL) into the set.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan.hdf5.signature import HDF5_MAGIC
from refzarr.scan.paths import reference_url

__all__ = [
    "PLACEHOLDER",
    "DataFiles",
    "check_shared_data_url",
    "data_file_url",
    "is_absolute_url",
    "local_or_url",
]

PLACEHOLDER = "OPeNDAP_DMRpp_DATA_ACCESS_URL"
"""What ``build_dmrpp -u`` writes where the data URL is filled in when the sidecar is served."""

SUFFIX = ".dmrpp"

_OTHER_MAGIC = (b"\x0e\x03\x13\x01", b"CDF\x01", b"CDF\x02", b"CDF\x05")
"""HDF4's and netCDF-3's first bytes (their DMR++ sidecars describe such files too)."""

_HEAD = 4104
"""Bytes read from a data file's start to find its signature (user blocks up to 4 KiB)."""

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def is_absolute_url(href: str | None) -> bool:
    """Whether ``href`` is a URL with a scheme (``https://``, ``s3://``, ``file://``)."""
    return bool(href) and _SCHEME.match(href or "") is not None


def local_or_url(url: str) -> str:
    """``url`` as every scanner references a file (`reference_url`): a local path or
    ``file://`` URL by its absolute path, any other URL (chained ones too) as given."""
    if "::" in url or (":" in url and not url.startswith("file:")):
        return url
    return reference_url(url, LocalFileSystem._strip_protocol(url), local=True)


def data_file_url(
    sidecar: str,
    data_url: str | None,
    href: str | None,
) -> str:
    """The URL of the data file a sidecar describes (see the module docstring).

    Raises
    ------
    ScanError
        When none of the three says where it is.
    """
    if data_url:
        return local_or_url(_filled(data_url, sidecar, href))
    if sidecar.endswith(SUFFIX) and len(sidecar) > len(SUFFIX):
        return local_or_url(sidecar[: -len(SUFFIX)])
    if is_absolute_url(href):
        return str(href)
    raise ScanError(
        f"{sidecar}: cannot tell where the data file is: the sidecar's name does not end with "
        f"'.dmrpp' and its dmrpp:href ({href!r}) is not an absolute URL; pass data_url=..."
    )


def check_shared_data_url(data_url: object, sidecars: int) -> None:
    """Refuse one fixed ``data_url`` (no ``{name}`` or ``{href}`` in it) for several sidecars:
    every one would read its chunks from the same data file, in silence for all but one.

    Raises
    ------
    ValueError
        Naming the option, the count and the template to use instead.
    """
    if sidecars < 2 or not isinstance(data_url, str):
        return
    if "{name}" in data_url or "{href}" in data_url:
        return
    raise ValueError(
        f"data_url {data_url!r} names one data file for {sidecars} files: every DMR++ sidecar "
        "would read its chunks from it; give a template with {name} (the sidecar's file name "
        "without .dmrpp, e.g. 's3://bucket/granules/{name}') or {href}, or scan the sidecars "
        "one by one"
    )


def _filled(template: str, sidecar: str, href: str | None) -> str:
    """``data_url`` with ``{name}`` (the sidecar's file name without ``.dmrpp``) and
    ``{href}`` (its ``dmrpp:href``, an absolute URL) filled in: one option for many sidecars.

    Raises
    ------
    ScanError
        When ``{href}`` is asked for and the sidecar's ``dmrpp:href`` is no absolute URL.
    """
    if "{href}" in template and not is_absolute_url(href):
        raise ScanError(
            f"{sidecar}: data_url {template!r} asks for the sidecar's dmrpp:href, but it is "
            f"{href!r}, not an absolute URL (a server-catalog path or placeholder); give the "
            "data file's location with {name} instead"
        )
    name = sidecar.rstrip("/").rsplit("/", 1)[-1]
    name = name[: -len(SUFFIX)] if name.endswith(SUFFIX) and name != SUFFIX else name
    return template.replace("{name}", name).replace("{href}", href or "")


def _beside(href: str, data_url: str) -> bool:
    """Whether the absolute URL ``href`` is where a chunk of ``data_url``'s sidecar may be:
    the same scheme and host (bucket) for a remote data file; for a local one, a ``file://``
    URL of the data file itself (symbolic links resolved: any other local file could be one
    its user did not mean to publish)."""
    data = data_url.rsplit("::", 1)[-1]
    theirs = urllib.parse.urlsplit(href)
    if "://" not in data or data.startswith("file://"):
        if theirs.scheme.lower() not in ("file", "local"):
            return False
        ours_path = os.path.realpath(LocalFileSystem._strip_protocol(data))
        return bool(os.path.realpath(LocalFileSystem._strip_protocol(href)) == ours_path)
    ours = urllib.parse.urlsplit(data)
    return (theirs.scheme.lower(), theirs.netloc.lower()) == (
        ours.scheme.lower(),
        ours.netloc.lower(),
    )


@dataclass
class DataFiles:
    """The data file of one scan, chunk ``href``s resolved, and bytes read from them on
    demand (one filesystem per URL, opened when first needed)."""

    url: str
    dataset_href: str | None
    storage_options: Mapping[str, Any] | None = None
    _opened: dict[str, tuple[fsspec.AbstractFileSystem, str]] = field(default_factory=dict)
    _sizes: dict[str, int] = field(default_factory=dict)

    def resolve(self, href: str | None, where: str) -> str:
        """The URL a chunk's ``href`` stands for (None: the data file)."""
        if href is None or href in (self.dataset_href, PLACEHOLDER, ""):
            return self.url
        if is_absolute_url(href):
            return href
        raise UnsupportedFeatureError(
            f"{where}: a chunk's href {href!r} is a relative path that is not the dataset's "
            "dmrpp:href; nothing says what it is relative to (server catalogs resolve it), so "
            "its chunks cannot be referenced"
        )

    def read(self, url: str, offset: int, length: int, where: str) -> bytes:
        """``length`` bytes of ``url`` from ``offset``; ScanError when fewer are there.

        Raises
        ------
        UnsupportedFeatureError
            When ``url`` (a chunk's ``href``) is not beside the data file: a sidecar from a
            stranger would have the scan copy any file the user can read into the set.
        """
        if url != self.url and not _beside(url, self.url):
            raise UnsupportedFeatureError(
                f"{where}: a chunk's href {url!r} is not beside the data file {self.url} "
                "(another scheme, host or bucket, or another local file): its bytes are not "
                "read to inline them (a sidecar from a stranger could name any file you can "
                "read, and the scan would copy it into the reference set)"
            )
        fs, path = self._fs(url)
        try:
            data = bytes(fs.cat_file(path, start=offset, end=offset + length))
        except FileNotFoundError as exc:
            raise ScanError(f"{where}: the data file {url} does not exist ({exc})") from exc
        except OSError as exc:
            raise ScanError(f"{where}: reading {url} failed: {exc}") from exc
        if len(data) != length:
            raise ScanError(
                f"{where}: the sidecar puts {length} bytes at offset {offset} of {url}, which "
                f"holds only {len(data)} there (the data file is shorter than the sidecar says)"
            )
        return data

    def size(self, url: str, where: str) -> int:
        """The size of ``url`` in bytes, asked once per file, which is checked to be a file
        a sidecar can describe (HDF5, HDF4 or netCDF by its first bytes).

        Raises
        ------
        ScanError
            When the file does not exist or is of another kind (a wrong ``data_url``).
        """
        known = self._sizes.get(url)
        if known is None:
            fs, path = self._fs(url)
            try:
                known = int(fs.size(path))
            except FileNotFoundError as exc:
                raise ScanError(
                    f"{where}: the data file {url} does not exist ({exc}); if the data files are "
                    "elsewhere, say where with data_url (refzarr scan --data-url)"
                ) from exc
            self._check_kind(url, known, where)
            self._sizes[url] = known
        return known

    def _check_kind(self, url: str, size: int, where: str) -> None:
        """An HDF5 signature at 0, 512, 1024, ... (after a user block), or HDF4's or
        netCDF's magic at 0; else `ScanError` (read in one request for most files)."""
        head = self.read(url, 0, min(size, _HEAD), where) if size else b""
        if head.startswith(_OTHER_MAGIC):
            return
        offset = 0
        while offset + len(HDF5_MAGIC) <= size:
            if offset + len(HDF5_MAGIC) <= len(head):
                found = head[offset : offset + len(HDF5_MAGIC)]
            else:
                found = self.read(url, offset, len(HDF5_MAGIC), where)
            if found == HDF5_MAGIC:
                return
            offset = 512 if offset == 0 else 2 * offset
        raise ScanError(
            f"{where}: the data file {url} is no HDF5, HDF4 or netCDF file (it starts with "
            f"{head[:8]!r}): is data_url right?"
        )

    def reader(self, url: str, where: str) -> Any:
        """``read_range(offset, length)`` of ``url`` (for `refzarr.scan.coordinates`)."""
        return lambda offset, length: self.read(url, offset, length, where)

    def _fs(self, url: str) -> tuple[fsspec.AbstractFileSystem, str]:
        opened = self._opened.get(url)
        if opened is None:
            opened = fsspec.core.url_to_fs(url, **dict(self.storage_options or {}))
            self._opened[url] = opened
        return opened
