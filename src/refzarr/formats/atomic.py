"""Atomic outputs: write under a temporary name beside the target, then rename over it.

A failed write leaves no partial output and no temporary behind, and keeps an older file or
directory intact. On the local disk the new file's bytes are flushed (``fsync``) before the
rename and the rename itself after it, so even a crash cannot leave a truncated file where
the old one stood. On other filesystems (object stores, memory) a file is moved with fsspec's
``mv`` straight over the old one, never deleted first; a directory is moved file by file
(every file copied, then the originals deleted), as fsspec's recursive ``mv`` also tries to
copy an object store's pseudo-directories and fails with "no such key".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from refzarr.formats.source import Location

__all__ = ["atomic_path", "temporary_name", "write_atomic"]

TEMPORARY_MARK = ".tmp-"
"""What a temporary name adds to the target's name (followed by a random hex suffix)."""


def temporary_name(path: str) -> str:
    """A fresh name beside ``path`` for output that will be renamed onto it."""
    return f"{path}{TEMPORARY_MARK}{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def atomic_path(location: Location, *, directory: bool) -> Iterator[str]:
    """Yield a temporary path beside ``location``; move it onto ``location`` on success.

    Parameters
    ----------
    location
        The final file or directory; missing parent directories are created.
    directory
        True when the output is a directory (a Parquet reference set).

    On error (in the body or while renaming) the temporary output is removed and whatever
    stood at ``location`` before is untouched.
    """
    fs = location.fs
    temporary = temporary_name(location.path)
    parent = location.path.rpartition("/")[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)
    try:
        yield temporary
        _replace(location, temporary, directory=directory)
    except BaseException:
        _discard(location, temporary)
        raise


def write_atomic(location: Location, parts: Sequence[Any]) -> None:
    """Write the concatenation of ``parts`` (bytes-like pieces) to ``location`` atomically."""
    with atomic_path(location, directory=False) as temporary:
        if location.is_local:
            with open(temporary, "xb") as file:
                file.writelines(parts)
                file.flush()
                os.fsync(file.fileno())
        else:
            location.fs.pipe_file(temporary, b"".join(parts))


def _replace(location: Location, temporary: str, *, directory: bool) -> None:
    target, fs = location.path, location.fs
    if not location.is_local:
        if directory:
            _swap_directory(
                temporary,
                target,
                exists=fs.exists,
                rename=lambda a, b: _move_tree(fs, a, b),
                remove=lambda path: fs.rm(path, recursive=True),
            )
        else:
            fs.mv(temporary, target)
        return
    if not directory:
        os.replace(temporary, target)
    elif os.path.isfile(target):
        raise IsADirectoryError(f"{target}: a file stands where the reference directory goes")
    else:
        _swap_directory(
            temporary,
            target,
            exists=os.path.exists,
            rename=os.rename,
            remove=lambda path: shutil.rmtree(path, ignore_errors=True),
        )
    _sync_directory(os.path.dirname(target))


def _swap_directory(
    temporary: str,
    target: str,
    *,
    exists: Callable[[str], bool],
    rename: Callable[[str, str], Any],
    remove: Callable[[str], Any],
) -> None:
    """Put ``temporary`` at ``target``; an old ``target`` is set aside until that succeeded."""
    if not exists(target):
        rename(temporary, target)
        return
    backup = f"{target}.old-{uuid.uuid4().hex[:12]}"
    rename(target, backup)
    try:
        rename(temporary, target)
    except BaseException:
        if exists(target):  # half moved (an object store moves file by file)
            remove(target)
        rename(backup, target)
        raise
    remove(backup)


def _move_tree(fs: Any, source: str, destination: str) -> None:
    """Move the files below ``source`` to the same places below ``destination`` (fsspec).

    Every file is copied before any is deleted, so a failure leaves ``source`` complete.
    """
    prefix = source.rstrip("/") + "/"
    files = [path for path in fs.find(source) if path.startswith(prefix)]
    targets = [destination.rstrip("/") + "/" + path[len(prefix) :] for path in files]
    if files:
        fs.copy(files, targets)  # lists: copied as given, nothing expanded
        fs.rm(files)
    if fs.exists(source):  # pseudo-directories of filesystems that keep them (memory)
        fs.rm(source, recursive=True)


def _discard(location: Location, temporary: str) -> None:
    """Remove a temporary output, if any (errors while doing so are not the story to tell)."""
    with contextlib.suppress(OSError):
        if location.is_local:
            if os.path.isdir(temporary):
                shutil.rmtree(temporary)
            elif os.path.lexists(temporary):
                os.unlink(temporary)
        elif location.fs.exists(temporary):
            location.fs.rm(temporary, recursive=True)


def _sync_directory(path: str) -> None:
    """Make a rename in ``path`` durable (POSIX; elsewhere a no-op)."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        handle = os.open(path or ".", os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
