"""Which format a source is in: from its first bytes (or a directory's entries), never its name."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.scan.base import HEAD_BYTES, Probe, ScanFormat, formats_summary, registered_formats
from refzarr.scan.paths import LOCAL_HEAD_BYTES, LocalFile, opened_path, plain_local_path

if TYPE_CHECKING:
    import fsspec

__all__ = [
    "describe_head",
    "detect_format",
    "detect_probe",
    "directory_probe",
    "open_local",
    "probe_source",
]


def detect_format(url: str, storage_options: Mapping[str, Any] | None = None) -> ScanFormat:
    """The format of the file or store at ``url`` (a local path or an fsspec URL).

    Raises
    ------
    SourceNotFoundError
        When nothing exists at ``url``.
    ScanError
        When the source is in no format refzarr scans; the message lists the formats and
        shows the source's first bytes.
    """
    return detect_probe(probe_source(url, storage_options))


def probe_source(url: str, storage_options: Mapping[str, Any] | None = None) -> Probe:
    """What detection needs of ``url``: its first bytes (one small ranged read), or a
    directory's entry names."""
    if plain_local_path(url, storage_options) is not None:
        return _plain_local_probe(url)
    import fsspec  # on first use: `import refzarr` stays light

    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    try:
        head = fs.cat_file(path, start=0, end=HEAD_BYTES)
    except (IsADirectoryError, NotADirectoryError):
        return directory_probe(fs, path, url)
    except FileNotFoundError as exc:
        if _is_directory(fs, path):
            return directory_probe(fs, path, url)
        raise SourceNotFoundError(f"{url}: no such file or directory") from exc
    except OSError as exc:  # an object store refuses a range of an empty object
        if _size(fs, path) != 0:
            raise ScanError(f"{url}: reading its first bytes failed: {exc}") from exc
        head = b""

    sizes: list[int | None] = []

    def read_at(offset: int, length: int) -> bytes:
        if not sizes:  # object stores refuse a range past the end (S3: "not satisfiable")
            sizes.append(_size(fs, path))
        size = sizes[0]
        end = offset + length if size is None else min(offset + length, size)
        if end <= offset:
            return b""
        data: bytes = fs.cat_file(path, start=offset, end=end)
        return data

    return Probe(url, bytes(head), read_at)


def _plain_local_probe(url: str) -> Probe:
    """`probe_source` for a plain local path, without fsspec (a scan of a small file costs a
    few milliseconds: fsspec's machinery would add a tenth of one)."""
    probe, opened = open_local(url, HEAD_BYTES)
    if opened is not None:
        os.close(opened.fd)
    return probe


def open_local(url: str, head_bytes: int = LOCAL_HEAD_BYTES) -> tuple[Probe, LocalFile | None]:
    """The probe of a plain local path (`plain_local_path` is not None) and, for a file, the
    file itself, open (the caller closes ``fd``) with its first ``head_bytes``; None for a
    directory.

    Raises
    ------
    SourceNotFoundError, ScanError
        As `probe_source` does.
    """
    path = os.path.expanduser(url)
    try:
        # opened first, then fstat-ed (one path lookup, not two); a FIFO opened without
        # waiting for a writer, and none is read: only regular files are
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{url}: no such file or directory") from exc
    except PermissionError as exc:
        raise ScanError(f"{url}: cannot read it: permission denied") from exc
    except OSError:  # a socket cannot be opened: said as for a pipe; else this error
        _not_a_file(url, path, os.stat(path))
        raise
    try:
        state = os.fstat(fd)
        regular = stat.S_ISREG(state.st_mode)
        head = os.pread(fd, head_bytes, 0) if regular else b""
    except BaseException:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        return _not_a_file(url, path, state), None

    def read_at(offset: int, length: int) -> bytes:
        with open(path, "rb") as f:
            return os.pread(f.fileno(), length, offset)

    probe = Probe(url, head[:HEAD_BYTES], read_at)
    plain = plain_local_path(url, None) or path
    return probe, LocalFile(url, plain, fd, state, head, opened_path(plain))


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


def _not_a_file(url: str, path: str, state: os.stat_result) -> Probe:
    """The probe of a directory; `ScanError` for a pipe, socket or device."""
    if not stat.S_ISDIR(state.st_mode):  # a FIFO or a device would block or never end
        raise ScanError(
            f"{url}: not a regular file (a pipe, socket or device); refzarr "
            "scans files and Zarr store directories"
        )
    try:
        return Probe(url, b"", None, frozenset(os.listdir(path)))
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{url}: no such file or directory") from exc
    except PermissionError as exc:
        raise ScanError(f"{url}: cannot read it: permission denied") from exc


def _size(fs: fsspec.AbstractFileSystem, path: str) -> int | None:
    try:
        return int(fs.size(path))
    except (OSError, TypeError, ValueError):
        return None


def _is_directory(fs: fsspec.AbstractFileSystem, path: str) -> bool:
    try:
        return bool(fs.isdir(path))
    except OSError:  # a bucket that does not exist, a refused listing
        return False


def directory_probe(fs: fsspec.AbstractFileSystem, path: str, url: str) -> Probe:
    """The probe of the directory ``path`` on ``fs`` (shown as ``url``): its entry names."""
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(fs, LocalFileSystem):  # fsspec's local ls stats every entry, even detail=False
        return Probe(url, b"", None, frozenset(os.listdir(path)))
    names = frozenset(entry.rstrip("/").rpartition("/")[2] for entry in fs.ls(path, detail=False))
    return Probe(url, b"", None, names)


def detect_probe(probe: Probe) -> ScanFormat:
    """The first registered format whose detector accepts ``probe``.

    Raises
    ------
    ScanError
        When none does.
    """
    if not probe.is_directory and not probe.head:
        raise ScanError(f"{probe.url}: the file is empty (0 bytes); refzarr scans no empty file")
    for scan_format in registered_formats():
        if scan_format.detect(probe):
            return scan_format
    if probe.is_directory:
        raise ScanError(
            f"{probe.url}: a directory that is no store refzarr scans (no .zgroup, .zarray or "
            f"zarr.json in it); {_what_to_scan(probe)}. refzarr scans: {formats_summary()}"
        )
    raise ScanError(
        f"{probe.url}: not a format refzarr recognises from its first bytes "
        f"({describe_head(probe.head)}); refzarr scans: {formats_summary()}. "
        "Pass format=... (refzarr scan --input-format NAME) to scan it as one of these anyway"
    )


def _what_to_scan(probe: Probe) -> str:
    """The hint for a directory that is no store: its stores when it holds folders named
    like them (``a.zarr``), else its files."""
    stores = sorted(n for n in probe.listing if n.endswith((".zarr", ".zr")))
    if not stores:
        return "scan its files instead"
    shown = ", ".join(stores[:3]) + (", ..." if len(stores) > 3 else "")
    suffix = stores[0].rsplit(".", 1)[1]
    pattern = f"{probe.url.rstrip('/')}/*.{suffix}"
    return f"it holds Zarr stores ({shown}): scan them instead (e.g. '{pattern}')"


def describe_head(head: bytes, count: int = 16) -> str:
    """``first bytes 89 48 44 46 ... ('.HDF....')``: hex and printable text, for messages."""
    shown = head[:count]
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in shown)
    return f"first bytes {shown.hex(' ')} ({text!r})"
