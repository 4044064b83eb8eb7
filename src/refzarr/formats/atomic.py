"""Atomic outputs: write under a temporary name, then rename over the target.

A failed write leaves no partial output and keeps an older file or directory intact.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator

from refzarr.formats.source import Location

__all__ = ["atomic_path"]


@contextlib.contextmanager
def atomic_path(location: Location, *, directory: bool) -> Iterator[str]:
    """Yield a temporary path beside ``location``; move it onto ``location`` on success.

    On error the temporary output is removed and the original target is untouched.
    """
    fs = location.fs
    temporary = f"{location.path}.tmp-{uuid.uuid4().hex[:12]}"
    parent = location.path.rpartition("/")[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)
    try:
        yield temporary
        _replace(location, temporary, directory=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            if fs.exists(temporary):
                fs.rm(temporary, recursive=directory)
        raise


def _replace(location: Location, temporary: str, *, directory: bool) -> None:
    target = location.path
    if location.is_local:
        if not directory:
            os.replace(temporary, target)
            return
        _replace_local_directory(temporary, target)
        return
    fs = location.fs
    if fs.exists(target):
        fs.rm(target, recursive=directory)
    fs.mv(temporary, target, recursive=directory)


def _replace_local_directory(temporary: str, target: str) -> None:
    if os.path.isfile(target):
        raise IsADirectoryError(f"{target}: a file stands where the reference directory goes")
    if not os.path.exists(target):
        os.rename(temporary, target)
        return
    backup = f"{target}.old-{uuid.uuid4().hex[:12]}"
    os.rename(target, backup)
    try:
        os.rename(temporary, target)
    except BaseException:
        os.rename(backup, target)
        raise
    shutil.rmtree(backup, ignore_errors=True)
