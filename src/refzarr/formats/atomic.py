"""Atomic outputs: write under a temporary name beside the target, then rename over it.

A failed write leaves no partial output and no temporary behind, and keeps an older file or
directory intact. On the local disk the new file's bytes are flushed (``fsync``) before the
rename and the rename itself after it, so even a crash cannot leave a truncated file where
the old one stood. A local directory (a Parquet set) replacing an older one is swapped with
it in one step (Linux ``renameat2(RENAME_EXCHANGE)``), so a crash at any moment leaves the
old set or the new one at the target, never nothing; where the filesystem cannot exchange,
the old set is moved aside first and a crash between the two renames leaves it at
``<target>.old-<hex>``, which the next write puts back. Every local temporary is locked
(``flock``) while its writer lives: the next write of a directory removes the leftovers of
its writers that died (and restores a set left aside), never those of a writer still
running. A killed file write leaves its temporary file (harmless; `clean_leftovers` removes
it): looking for them would list the folder at every write. A writer may keep the directory
it replaced at its temporary name, unlocked, for the next writer to recycle as its own
temporary (``recycle=True``: Parquet appends); any other write removes it as a leftover.

Local writers of one target take turns (`refzarr.formats.target_lock`): a whole write holds
the target's lock around its exchange, an append or a refresh from before it reads the set.

On other filesystems (object stores, memory) a file is moved with fsspec's ``mv`` straight
over the old one, never deleted first; a directory is moved file by file (every file copied,
then the originals deleted), as fsspec's recursive ``mv`` also tries to copy an object
store's pseudo-directories and fails with "no such key": not atomic (see docs/security.md).
Nothing is locked there: an append or refresh passes the `set_version` it saw before
reading, and a set replaced since raises `ConcurrentWriteError` instead of being
overwritten (a narrow window between that check and the move remains).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from refzarr.errors import ConcurrentWriteError
from refzarr.formats.source import Location
from refzarr.formats.target_lock import Held, hold_parent, target_lock
from refzarr.io.paths import opened_path

__all__ = [
    "atomic_path",
    "clean_leftovers",
    "flush_tree",
    "set_version",
    "step",
    "temporary_name",
    "write_atomic",
]

TEMPORARY_MARK = ".tmp-"
"""What a temporary name adds to the target's name (followed by a random hex suffix)."""
BACKUP_MARK = ".old-"
"""What an older directory set aside while replaced adds to the target's name."""

fault_hook: Callable[[str], None] | None = None
"""Called with the name of each step of a replace (tests make a write die there)."""


def _step(name: str) -> None:
    if fault_hook is not None:
        fault_hook(name)


step = _step
"""Mark a named step of a write (writers inside `atomic_path` mark their own steps)."""


def temporary_name(path: str) -> str:
    """A fresh name beside ``path`` for output that will be renamed onto it."""
    return f"{path}{TEMPORARY_MARK}{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def atomic_path(
    location: Location,
    *,
    directory: bool,
    recycle: bool = False,
    sync: bool = True,
    version: object = None,
) -> Iterator[str]:
    """Yield a temporary path beside ``location``; move it onto ``location`` on success.

    Parameters
    ----------
    location
        The final file or directory; missing parent directories are created.
    directory
        True when the output is a directory (a Parquet reference set).
    recycle
        For a local directory: the temporary may be a directory a former write left beside
        ``location`` (a replaced set, or a dead writer's temporary), holding any files (the
        body must remove or keep each); and the directory this write replaces is left at
        the temporary name for the next write instead of being deleted. Creating and
        deleting directories is what costs most in an append of hard links; emptying a
        directory of its few changed names costs little. Another write removes it as a
        leftover (`clean_leftovers`).
    sync
        Flush the rename to disk (``fsync`` of the parent directory) after it. False leaves
        that to the filesystem (ext4 commits within seconds): a kill still leaves the old
        output or the new one, a power cut may undo the replacement.
    version
        Not on the local disk: the `set_version` of the set at ``location`` seen before
        reading it (appends, refreshes); when another writer replaced the set since, the
        output is discarded and `ConcurrentWriteError` raised instead of replacing it.
        (Local writers wait for each other instead: `refzarr.formats.target_lock`.)

    On error (in the body or while renaming) the temporary output is removed and whatever
    stood at ``location`` before is untouched.
    """
    fs = location.fs
    temporary = temporary_name(location.path)
    parent = location.path.rpartition("/")[0]
    if parent:
        fs.makedirs(parent, exist_ok=True)
    recycle = recycle and directory and location.is_local
    with contextlib.ExitStack() as held:
        if location.is_local:
            spare = None
            if directory:  # not for files: a folder of 10,000 outputs would be listed each time
                spare = clean_leftovers(location.path, spare=recycle)
            if spare is not None and _claimed(held, spare):
                temporary = spare
            else:
                held.enter_context(_locked_new(temporary, directory=directory))
        try:
            yield temporary
            _step("written")
            if version is not None and not location.is_local:
                _check_version(location, directory, version)
            with target_lock(location) as lock:  # the caller's, when it holds it already
                _replace(location, temporary, directory=directory, keep_replaced=recycle, lock=lock)
            if sync and location.is_local:
                _sync_directory(os.path.dirname(location.path))
        except BaseException:
            _discard(location, temporary)
            raise


def set_version(location: Location, *, directory: bool) -> object:
    """What tells the version of the set at ``location`` on a filesystem that locks
    nothing (size, ETag, modification time of the JSON file or of a Parquet set's
    ``.zmetadata``, which every write replaces); ``"absent"`` when nothing is there. Taken
    before a set is read, compared by `atomic_path` before it is replaced."""
    path = f"{location.path.rstrip('/')}/.zmetadata" if directory else location.path
    fs = location.fs
    with contextlib.suppress(AttributeError, OSError):
        fs.invalidate_cache(path)  # listings cached by s3fs would hide a newer version
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return "absent"
    keys = ("size", "ETag", "etag", "LastModified", "mtime", "created")
    return tuple(str(info.get(key)) for key in keys)


def _check_version(location: Location, directory: bool, version: object) -> None:
    if set_version(location, directory=directory) != version:
        raise ConcurrentWriteError(
            f"{location.shown}: another writer replaced the reference set while this one "
            "read and rewrote it (nothing is locked on this filesystem); nothing was "
            "written: run it again to apply it to the new set"
        )


_LEFTOVER = re.compile(r"(?P<mark>\.tmp-|\.old-)[0-9a-f]{12}")


def clean_leftovers(target: str, *, spare: bool = False) -> str | None:
    """Remove what writers of local ``target`` that died left beside it; put back an older
    directory set aside (``.old-``) when nothing stands at ``target``.

    With ``spare``, one temporary directory no writer holds is kept and its path returned
    (for `atomic_path` to recycle; it is not locked on return).
    """
    if os.name != "posix":
        return None
    # the folder the system opens (``abspath`` would drop ``link/..`` as text: another folder)
    folder, name = os.path.split(opened_path(target))
    try:
        entries = os.listdir(folder)
    except OSError:
        return None
    kept = None
    for entry in sorted(entries):
        found = _LEFTOVER.fullmatch(entry[len(name) :]) if entry.startswith(name) else None
        if found is None:
            continue
        path = os.path.join(folder, entry)
        with contextlib.suppress(OSError), _unlocked(path) as free:
            if not free:
                continue  # a writer still running holds it
            if found["mark"] == BACKUP_MARK and not os.path.lexists(target):
                os.rename(path, target)  # the older set, moved aside by a writer that died
            elif spare and kept is None and found["mark"] == TEMPORARY_MARK and _is_dir(path):
                kept = path
            else:
                _remove_local(path)
    return kept


def _is_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _claimed(held: contextlib.ExitStack, path: str) -> bool:
    """Lock the leftover directory ``path`` for the body of ``held`` (False when another
    writer took it meanwhile)."""
    import fcntl

    try:
        handle = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        return False
    held.callback(os.close, handle)
    return os.path.isdir(path)  # False: removed by another writer since the listing


@contextlib.contextmanager
def _unlocked(path: str) -> Iterator[bool]:
    """Whether no live writer holds ``path`` (locked for the body when so)."""
    import fcntl

    handle = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(handle)


@contextlib.contextmanager
def _locked_new(path: str, *, directory: bool) -> Iterator[None]:
    """Create ``path`` (an empty directory or file) and hold a lock on it while writing."""
    if os.name != "posix":
        yield
        return
    import fcntl

    if directory:
        os.mkdir(path)
        handle = os.open(path, os.O_RDONLY)
    else:
        handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _remove_local(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)


def write_atomic(location: Location, parts: Sequence[Any], *, version: object = None) -> None:
    """Write the concatenation of ``parts`` (bytes-like pieces) to ``location`` atomically
    (``version``: see `atomic_path`)."""
    with atomic_path(location, directory=False, version=version) as temporary:
        if location.is_local:
            with open(temporary, "wb") as file:  # created (and locked) by atomic_path
                file.writelines(parts)
                file.flush()
                os.fsync(file.fileno())
        else:
            location.fs.pipe_file(temporary, b"".join(parts))


def _replace(
    location: Location,
    temporary: str,
    *,
    directory: bool,
    keep_replaced: bool = False,
    lock: Held | None = None,
) -> None:
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
    elif os.path.isdir(target) and _exchange(temporary, target):
        _step("exchanged")  # the old set is at the temporary name now
        if not keep_replaced:  # kept: unlocked on return, recycled or removed by the next write
            shutil.rmtree(temporary, ignore_errors=True)
    elif lock is None:  # not POSIX: nothing is locked
        _swap_local(temporary, target)
    else:
        # the old set is the locked target: set aside, it is not taken for a dead writer's;
        # while nothing stands at the target the parent's lock keeps other writers waiting
        with hold_parent(lock, target):
            _swap_local(temporary, target)


def _swap_local(temporary: str, target: str) -> None:
    _swap_directory(
        temporary,
        target,
        exists=os.path.exists,
        rename=os.rename,
        remove=lambda path: shutil.rmtree(path, ignore_errors=True),
    )


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
    backup = f"{target}{BACKUP_MARK}{uuid.uuid4().hex[:12]}"
    rename(target, backup)
    _step("set aside")
    try:
        rename(temporary, target)
    except BaseException:
        if exists(target):  # half moved (an object store moves file by file)
            remove(target)
        rename(backup, target)
        raise
    _step("moved in")
    remove(backup)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(first: str, second: str) -> bool:
    """Swap two local paths in one step (Linux renameat2); False where that cannot be done."""
    if os.environ.get("REFZARR_NO_EXCHANGE"):  # tests of the fallback
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    paths = os.fsencode(first), os.fsencode(second)
    if renameat2(_AT_FDCWD, paths[0], _AT_FDCWD, paths[1], _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), second)


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


def flush_tree(root: str) -> None:
    """Flush (``fsync``) every file and directory below local ``root`` to disk."""
    for folder, _, names in os.walk(root):
        for name in names:
            _fsync(os.path.join(folder, name))
        _fsync(folder)


def _fsync(path: str) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


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
