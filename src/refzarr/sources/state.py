"""What a source file is like now: its size, modification time and ETag (``os.stat`` for local
files, fsspec's ``info`` or a folder listing elsewhere), as a scan records them and
`refzarr.check_sources` compares them."""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from stat import S_ISDIR
from typing import Any

from refzarr.errors import RefFormatError
from refzarr.io.paths import opened_path

__all__ = [
    "DIRECTORY",
    "LISTING_MIN",
    "NO_SUCH_FILE",
    "SourceState",
    "Unreachable",
    "info_state",
    "is_local",
    "local_path",
    "local_state",
    "local_state_now",
    "scanned_remote",
    "scanned_state",
    "source_states",
    "stat_state",
    "state_now",
]

LISTING_MIN = 8
"""Remote files of one folder from which on the folder is listed once instead of asking for
each file (one request instead of many)."""

NO_SUCH_FILE = "no such file"
"""`state_now`'s reason for a file that does not exist."""

DIRECTORY = "a directory, not a file"
"""`state_now`'s reason, and `local_state`'s `Unreachable` one, for a directory."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MTIME_KEYS = ("LastModified", "last_modified", "mtime", "updated", "modified", "created")
_ETAG_KEYS = ("ETag", "etag", "e_tag")


@dataclass(frozen=True, slots=True)
class SourceState:
    """A file's size, modification time (ISO 8601 UTC, microseconds) and ETag (None where the
    storage has none, as for local files)."""

    size: int
    mtime: str | None = None
    etag: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The record written in the reference set."""
        doc: dict[str, Any] = {"size": self.size}
        if self.mtime is not None:
            doc["mtime"] = self.mtime
        if self.etag is not None:
            doc["etag"] = self.etag
        return doc

    @classmethod
    def from_json(cls, doc: Any, where: str) -> SourceState:
        """The state a reference set recorded; RefFormatError naming ``where`` if malformed."""
        if type(doc) is dict:  # as parsed: exact types checked without the ABCs (20,000 files)
            size, mtime, etag = doc.get("size"), doc.get("mtime"), doc.get("etag")
            if type(size) is int and _text_or_none(mtime) and _text_or_none(etag):
                return cls(size, mtime, etag)
        ok = isinstance(doc, Mapping) and isinstance(doc.get("size"), int)
        ok = ok and all(isinstance(doc.get(k), str | None) for k in ("mtime", "etag"))
        if not ok:
            raise RefFormatError(f"{where}: a source record must be {{size, mtime, etag}}: {doc!r}")
        return cls(int(doc["size"]), doc.get("mtime"), doc.get("etag"))

    def changes(self, now: SourceState) -> list[str]:
        """What differs in ``now`` (``["size 10 -> 12", ...]``); an ETag known on both sides
        decides over the modification time (a file rewritten with the same bytes is unchanged)."""
        found = []
        if self.size != now.size:
            found.append(f"size {self.size:,} -> {now.size:,} bytes")
        if self.etag is not None and now.etag is not None:
            if self.etag != now.etag:
                found.append(f"ETag {self.etag} -> {now.etag}")
        elif self.mtime != now.mtime:
            found.append(f"modified {self.mtime} -> {now.mtime}")
        return found

    def modified_at(self) -> datetime | None:
        """The modification time as an aware datetime (None when unknown)."""
        if self.mtime is None:
            return None
        return datetime.fromisoformat(self.mtime)


def _text_or_none(value: Any) -> bool:
    return value is None or type(value) is str


@dataclass(frozen=True, slots=True)
class Unreachable:
    """A file whose state could not be asked for (permissions, network): why."""

    reason: str


def is_local(url: str) -> bool:
    """Whether ``url`` is a local path (plain or ``file://``)."""
    return "://" not in url or url.startswith("file://")


def local_path(url: str) -> str:
    """The absolute local path of a plain path or ``file://`` URL, as scanners reference it
    (`refzarr.io.paths.opened_path`: ``link/..`` resolved as the system does)."""
    return opened_path(url.removeprefix("file://"))


def source_states(
    urls: Iterable[str], storage_options: Mapping[str, Any] | None = None
) -> dict[str, SourceState | Unreachable | None]:
    """The state of every URL now: None for a file that does not exist.

    Local files are ``os.stat``-ed; remote ones are asked through fsspec (``info`` per file,
    or one listing for a folder holding at least `LISTING_MIN` of them).
    """
    out: dict[str, SourceState | Unreachable | None] = {}
    remote: dict[str, list[str]] = {}
    for url in dict.fromkeys(urls):
        if is_local(url):
            out[url] = local_state(url)
        else:
            remote.setdefault(url.split("://", 1)[0], []).append(url)
    for urls_of_protocol in remote.values():
        out.update(_remote_states(urls_of_protocol, storage_options))
    return out


def local_state(url: str) -> SourceState | Unreachable | None:
    """A local file's state now, from one ``os.stat`` of it as the system opens it (an
    absolute path as it is spelled: ``dir/gone/../a.nc`` cannot be opened when ``gone`` does
    not exist); None when there is no such file; `Unreachable` saying why when it cannot be
    asked or is a directory (`DIRECTORY`). Every local state is taken here: for
    `source_states`, `scanned_state`, `state_now` (validate) and the read-time guard."""
    path = url if url.startswith("/") else local_path(url)
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return Unreachable(f"{type(exc).__name__}: {exc.strerror or exc}")
    return Unreachable(DIRECTORY) if S_ISDIR(stat.st_mode) else _stat_state(stat)


def _stat_state(stat: os.stat_result) -> SourceState:
    total = stat.st_mtime_ns // 1000
    seconds, micros = divmod(total, 1_000_000)
    if seconds < 0:  # before 1970: the general (slower) path
        return SourceState(int(stat.st_size), _iso(_EPOCH + timedelta(microseconds=total)))
    # what `_iso` gives, formatted directly: this runs once per scanned file
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return SourceState(int(stat.st_size), f"{stamp}.{micros:06d}Z")


def _remote_states(
    urls: list[str], storage_options: Mapping[str, Any] | None
) -> dict[str, SourceState | Unreachable | None]:
    import fsspec

    try:
        fs, _ = fsspec.core.url_to_fs(urls[0], **dict(storage_options or {}))
    except (ValueError, ImportError) as exc:
        return dict.fromkeys(urls, Unreachable(f"cannot open this URL ({exc})"))
    paths = {url: fs._strip_protocol(url) for url in urls}
    folders: dict[str, list[str]] = {}
    for url, path in paths.items():
        folders.setdefault(posixpath.dirname(path), []).append(url)
    out: dict[str, SourceState | Unreachable | None] = {}
    for folder, members in folders.items():
        listed = _listing(fs, folder) if len(members) >= LISTING_MIN else None
        for url in members:
            out[url] = _from_listing(listed, paths[url]) if listed else _info(fs, paths[url])
    return out


def _listing(fs: Any, folder: str) -> dict[str, Mapping[str, Any]] | None:
    try:
        entries = fs.ls(folder, detail=True)
    except (OSError, ValueError):
        return None  # each file asked for on its own (which names what fails)
    return {str(e["name"]).rstrip("/"): e for e in entries if e.get("type") != "directory"}


def _from_listing(
    listed: dict[str, Mapping[str, Any]], path: str
) -> SourceState | Unreachable | None:
    info = listed.get(path.rstrip("/"))
    return None if info is None else _state(info)


def _info(fs: Any, path: str) -> SourceState | Unreachable | None:
    try:
        info = fs.info(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return Unreachable(f"{type(exc).__name__}: {exc}")
    if info.get("type") == "directory":
        return None
    return _state(info)


def info_state(info: Mapping[str, Any]) -> SourceState | None:
    """The state fsspec's ``info`` of a file gives (None for a directory)."""
    return None if info.get("type") == "directory" else _state(info)


def _state(info: Mapping[str, Any]) -> SourceState:
    etag = next((info[k] for k in _ETAG_KEYS if info.get(k)), None)
    mtime = next((info[k] for k in _MTIME_KEYS if info.get(k) is not None), None)
    return SourceState(
        int(info.get("size") or 0),
        None if mtime is None else _iso(_as_datetime(mtime)),
        None if etag is None else str(etag),
    )


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, int | float):
        moment = datetime.fromtimestamp(value, UTC)
    else:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def scanned_state(url: str, storage_options: Mapping[str, Any] | None = None) -> SourceState | None:
    """The state of a file about to be scanned; None for a directory (a Zarr store: its
    chunk files are recorded instead), a missing file (the scan names it) or an unreachable
    one."""
    if is_local(url):
        state = local_state(url)
    else:
        state = source_states([url], storage_options)[url]
    return state if isinstance(state, SourceState) else None


def scanned_remote(
    url: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[SourceState | None, Mapping[str, Any] | None]:
    """`scanned_state` of a remote file, with fsspec's ``info`` of it (None, None for a
    directory, a missing or an unreachable file): its scan opens the file with that info, so
    that fsspec does not ask for it again."""
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        info = fs.info(path)
    except (OSError, ValueError, ImportError):
        return None, None
    if info.get("type") == "directory":
        return None, None
    return _state(info), info


def stat_state(stat: os.stat_result) -> SourceState | None:
    """`scanned_state` of a local file from the ``os.stat`` of it the caller has taken."""
    return None if S_ISDIR(stat.st_mode) else _stat_state(stat)


def state_now(
    url: str, info: Callable[[str], Mapping[str, Any]], *, sized: bool = False
) -> SourceState | str:
    """What a source file the reader is about to read (or check) is like now, to compare
    with its scan's record; or why that cannot be said.

    Parameters
    ----------
    url
        The file as references name it (a local path, ``file://`` or a remote URL).
    info
        fsspec's ``info`` of a remote file (`refzarr.io.RangeReader.info`: within the
        reader's deadline, retried); not called for a local file, which is ``os.stat``-ed.
    sized
        A remote file whose storage gives no size is a reason ("its size is unknown")
        instead of a state of size 0 (as scans record it): for checks that need the size.

    Returns
    -------
    SourceState or str
        The state, or why there is none: `NO_SUCH_FILE`, ``"a directory, not a file"``,
        a local file's error, an unknown size.

    Raises
    ------
    Exception
        What ``info`` raises but FileNotFoundError (a remote file that cannot be asked).
    """
    if is_local(url):
        return local_state_now(url)
    try:
        found = info(url)
    except FileNotFoundError:
        return NO_SUCH_FILE
    if sized and found.get("size") is None:
        return f"{url}: its size is unknown (the server did not give it)"
    return info_state(found) or DIRECTORY


def local_state_now(url: str) -> SourceState | str:
    """`state_now` of a local file: `local_state`, or why there is none."""
    state = local_state(url)
    if state is None:
        return NO_SUCH_FILE
    if isinstance(state, Unreachable):
        why = state.reason
        return why if why == DIRECTORY else f"{url}: cannot get its size: {why}"
    return state
