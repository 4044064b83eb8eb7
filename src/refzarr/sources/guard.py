"""Reading only sources that are as scanned: `SourceGuard` compares every source file a read
needs with its scan's record (`RefGroup.sources`), once per file per opened reference set,
and refuses a changed one with `SourceChangedError`.

A local file costs one ``os.stat`` the first time a chunk of it is read; a remote one (only
with ``check_sources="all"``) one metadata request (a HEAD). Files the record does not name
(a set from another tool, inputs of a combine without a record) are read unchecked, as are
inlined chunks, which have no file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from refzarr.errors import SourceChangedError
from refzarr.io import RangeReader
from refzarr.model import RefGroup
from refzarr.sources.record import recorded_files
from refzarr.sources.state import SourceState, is_local, local_path, local_state, state_now

__all__ = ["CHECK_SOURCES", "CheckSources", "SourceGuard", "parse_check_sources", "source_guard"]

CheckSources = Literal["local", "all", "none", False]
"""What a read compares with the record: local files (default), all files, or nothing."""

CHECK_SOURCES = ("local", "all", "none")
"""The spellings of `CheckSources` as text (the CLI's ``--check-sources`` choices)."""


def parse_check_sources(value: Any) -> str:
    """``"local"``, ``"all"`` or ``"none"`` (for False); ValueError naming the choices."""
    if value is False:
        return "none"
    if isinstance(value, str) and value in CHECK_SOURCES:
        return value
    raise ValueError(
        "check_sources must be 'local' (compare local source files with the scan's record: "
        "the default), 'all' (remote ones too, one metadata request each) or 'none' / False, "
        f"got {value!r}"
    )


def source_guard(
    group: RefGroup,
    check_sources: CheckSources | SourceGuard = "local",
    where: str | None = None,
) -> SourceGuard | None:
    """The guard a reader of ``group`` calls (`RangeReader.url_check`); None when nothing is
    to be checked (``"none"``, or the group records no sources). ``where``: the reference
    set's path or URL, named in errors. A guard given as ``check_sources`` is returned as it
    is (a caller that knew the set's path made it)."""
    if isinstance(check_sources, SourceGuard):
        return check_sources
    mode = parse_check_sources(check_sources)
    if mode == "none" or group.sources is None:
        return None
    return SourceGuard(group.sources, remote=mode == "all", where=where)


class SourceGuard:
    """Compares each source file with its recorded state the first time it is read.

    Parameters
    ----------
    sources
        The record (`RefGroup.sources`).
    remote
        Check remote files too (one metadata request each); else local files only.
    where
        The reference set's path or URL, named in errors (the ``refzarr refresh`` to run).

    Notes
    -----
    Called by `RangeReader` with the distinct URLs of each read. What a file was found to be
    is kept (a dict, written whole per file: threads need no lock, a forked child keeps what
    its parent found), so each file costs one ``stat`` per guard, not one per chunk; a
    changed file raises again on every read without another ``stat``. A file that does not
    exist, or a local one that cannot be asked for (no permission), is left to the read,
    which names why, and is asked again next time; a remote one whose state cannot be had
    (after the reader's retries) raises the reader's `ChunkFetchError` naming it. Pickled,
    the guard carries its record, not what it found.
    """

    def __init__(
        self, sources: Mapping[str, Any], *, remote: bool = False, where: str | None = None
    ) -> None:
        self.sources = sources
        self.remote = remote
        self.where = where
        self._files: Mapping[str, Any] | None = None  # url -> recorded state (JSON)
        self._by_path: dict[str, str] | None = None
        self._found: dict[str, str | None] = {}  # url -> None (as recorded) or the error

    def __getstate__(self) -> dict[str, Any]:
        return {"sources": self.sources, "remote": self.remote, "where": self.where}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["sources"], remote=state["remote"], where=state["where"])  # type: ignore[misc]

    def __dask_tokenize__(self) -> tuple[str, bool, str | None]:
        # the reference set it guards is tokenized beside it (xarray's ``chunks``)
        return type(self).__name__, self.remote, self.where

    def __call__(self, reader: RangeReader, urls: Sequence[str]) -> None:
        """Raise `SourceChangedError` for the first of ``urls`` that changed since scanned."""
        found = self._found
        for url in urls:
            if url in found:
                error = found[url]
                if error is not None:
                    raise SourceChangedError(error)
                continue
            self._check(reader, url)

    def _check(self, reader: RangeReader, url: str) -> None:
        local = is_local(url)
        recorded = self._recorded_json(url, local) if local or self.remote else None
        if recorded is None:
            self._found[url] = None
            return
        now = _local_state(url) if local else _remote_state(reader, url)
        if now is None:
            return  # the read says why it cannot be had
        if _as_recorded(recorded, now):  # the usual case, without parsing the record
            self._found[url] = None
            return
        then = SourceState.from_json(recorded, f"{self._named}: source {url}")
        if not then.changes(now):
            self._found[url] = None
            return
        error = self._message(url, then, now)
        self._found[url] = error
        raise SourceChangedError(error)

    def recorded(self, url: str) -> SourceState | None:
        """The state the record gives ``url`` (None when it names no such file); a local
        file also under another spelling of its path (``file://``, ``.`` parts).

        Raises
        ------
        RefFormatError
            When the record is malformed, or of a newer version.
        """
        return self._recorded(url, is_local(url))

    def _recorded(self, url: str, local: bool) -> SourceState | None:
        recorded = self._recorded_json(url, local)
        if recorded is None:
            return None
        return SourceState.from_json(recorded, f"{self._named}: source {url}")

    def _recorded_json(self, url: str, local: bool) -> Any:
        """The record's JSON state of ``url`` (None when it names no such file)."""
        files = self._files
        if files is None:
            files = self._files = recorded_files(self.sources, self._named)
        if url not in files and local:
            by_path = self._by_path
            if by_path is None:
                by_path = self._by_path = {local_path(u): u for u in files if is_local(u)}
            url = by_path.get(local_path(url), url)
        return files.get(url)

    @property
    def _named(self) -> str:
        return self.where or "reference set"

    def _message(self, url: str, then: SourceState, now: SourceState) -> str:
        refresh = (
            f"`refzarr refresh {self.where}`"
            if self.where
            else ("`refzarr refresh REFS` on the reference set holding these references")
        )
        return (
            f"{url}: changed since it was scanned (recorded {_described(then)}; found "
            f"{_described(now)}): its references may point at other bytes now, so it is not "
            f"read. Scan it again with {refresh} (refzarr.refresh in Python), or read without "
            "this check with check_sources='none'"
        )


def _as_recorded(recorded: Any, now: SourceState) -> bool:
    """Whether a recorded JSON state has exactly ``now``'s size, time and ETag (enough to
    say unchanged; anything else is compared by `SourceState.changes`)."""
    get = getattr(recorded, "get", None)
    if get is None:
        return False
    return bool(get("size") == now.size and get("mtime") == now.mtime and get("etag") == now.etag)


def _local_state(url: str) -> SourceState | None:
    """The local file's state now (one ``stat``); None when there is none (no such file, a
    directory, no permission): the read says why."""
    now = local_state(url)
    return now if isinstance(now, SourceState) else None


def _remote_state(reader: RangeReader, url: str) -> SourceState | None:
    """The remote file's state now (one metadata request); None for a missing file or a
    directory. A file that cannot be asked raises the reader's `ChunkFetchError`."""
    now = state_now(url, reader.info)
    return now if isinstance(now, SourceState) else None


def _described(state: SourceState) -> str:
    parts = [f"size {state.size:,} bytes"]
    if state.mtime is not None:
        parts.append(f"modified {state.mtime}")
    if state.etag is not None:
        parts.append(f"ETag {state.etag}")
    return ", ".join(parts)
