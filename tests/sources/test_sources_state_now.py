"""`state_now`: one answer to "what is this source file like now" for ``validate`` (a reason
for each file without a state) and the read-time guard (no state: left to the read)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import refzarr.cli.checks as checks
import refzarr.sources.guard as guard
from refzarr import ChunkFetchError
from refzarr.io import RangeReader
from refzarr.sources.state import (
    NO_SUCH_FILE,
    SourceState,
    local_state_now,
    scanned_state,
    state_now,
)


def _never(url: str) -> Mapping[str, Any]:
    raise AssertionError(f"a local file asked through info: {url}")


def test_a_local_file_is_as_its_scan_records_it(tmp_path: Path) -> None:
    path = tmp_path / "a.nc"
    path.write_bytes(b"x" * 10)
    now = state_now(str(path), _never)
    assert now == scanned_state(str(path))
    assert isinstance(now, SourceState)
    assert now.size == 10
    assert state_now(path.as_uri(), _never) == now  # file:// spelled alike
    (tmp_path / "sub").mkdir()
    assert state_now(f"{tmp_path}/./sub/../a.nc", _never) == now


def test_a_path_is_asked_for_as_the_reader_opens_it(tmp_path: Path) -> None:
    """Through a folder that does not exist, ``gone/../a.nc`` cannot be opened: validate
    said the file was there (it looked up the path with ``..`` taken out as text)."""
    (tmp_path / "a.nc").write_bytes(b"abc")
    url = f"{tmp_path}/gone/../a.nc"
    reader = RangeReader()
    with pytest.raises(ChunkFetchError, match="No such file"):
        reader.read([url], [0], [1])
    assert checks.file_states(reader, [url]) == {url: NO_SUCH_FILE}
    assert guard._local_state(url) is None


def test_reasons_for_local_files_without_a_state(tmp_path: Path) -> None:
    assert state_now(str(tmp_path / "gone.nc"), _never) == NO_SUCH_FILE
    assert state_now(str(tmp_path), _never) == "a directory, not a file"
    if os.name == "posix" and os.geteuid() != 0:  # root stats anything
        locked = tmp_path / "locked"
        locked.mkdir()
        (locked / "a.nc").write_bytes(b"x")
        locked.chmod(0)
        try:
            why = local_state_now(str(locked / "a.nc"))
        finally:
            locked.chmod(0o700)
        assert isinstance(why, str)
        assert "a.nc: cannot get its size: PermissionError" in why


def _info(found: Mapping[str, Any] | type[BaseException]) -> Any:
    def info(url: str) -> Mapping[str, Any]:
        if isinstance(found, type):
            raise found(url)
        return found

    return info


@pytest.mark.parametrize(
    ("found", "sized", "expected"),
    [
        ({"size": 5, "ETag": '"e1"', "LastModified": 0}, False, SourceState(5, None, '"e1"')),
        (FileNotFoundError, False, NO_SUCH_FILE),
        ({"size": 0, "type": "directory"}, False, "a directory, not a file"),
        ({"ETag": '"e1"'}, False, SourceState(0, None, '"e1"')),  # as scans record it
        ({"ETag": '"e1"'}, True, "s3://b/k.nc: its size is unknown (the server did not give it)"),
    ],
    ids=["file", "missing", "directory", "no-size", "no-size-sized"],
)
def test_remote_files(found: Any, sized: bool, expected: Any) -> None:
    now = state_now("s3://b/k.nc", _info(found), sized=sized)
    if isinstance(expected, SourceState):
        assert isinstance(now, SourceState)
        assert (now.size, now.etag) == (expected.size, expected.etag)
        assert now.mtime == (None if "LastModified" not in found else "1970-01-01T00:00:00.000000Z")
    else:
        assert now == expected


def test_a_remote_file_that_cannot_be_asked_raises_what_info_raises() -> None:
    with pytest.raises(ChunkFetchError, match="cannot get"):
        state_now("s3://b/k.nc", _info(_Unasked))


class _Unasked(ChunkFetchError):
    def __init__(self, url: str) -> None:
        super().__init__(f"{url}: cannot get its size and state")


def test_validate_and_the_guard_see_the_same_states(tmp_path: Path) -> None:
    """Both use `state_now`: validate keeps the reason, the guard leaves the file to the read."""
    path = tmp_path / "a.nc"
    path.write_bytes(b"abc")
    reader = RangeReader()
    urls = [str(path), str(tmp_path / "gone.nc"), str(tmp_path)]
    states = checks.file_states(reader, urls)
    assert states == {
        str(path): scanned_state(str(path)),
        urls[1]: NO_SUCH_FILE,
        urls[2]: "a directory, not a file",
    }
    assert [guard._local_state(url) for url in urls] == [states[str(path)], None, None]


def test_every_local_state_is_taken_alike(tmp_path: Path) -> None:
    """`source_states` (check_sources, a scan's record), `scanned_state`, `state_now`
    (validate) and the guard take a local file's state in one place (`local_state`): the
    same state, and the same answer for a missing file, a directory and a path through a
    folder that does not exist (`source_states` had found ``gone/../a.nc``)."""
    from refzarr.sources.state import DIRECTORY, Unreachable, local_state, source_states

    path = tmp_path / "a.nc"
    path.write_bytes(b"abc")
    present = [str(path), path.as_uri(), f"{tmp_path}/./a.nc"]
    absent = [str(tmp_path / "gone.nc"), f"{tmp_path}/gone/../a.nc"]
    urls = [*present, *absent, str(tmp_path)]
    found = source_states(urls)
    state = local_state(str(path))
    assert isinstance(state, SourceState)
    for url in present:
        assert found[url] == scanned_state(url) == state_now(url, _never) == state
        assert guard._local_state(url) == state
    for url in absent:
        assert found[url] is None
        assert scanned_state(url) is guard._local_state(url) is None
        assert state_now(url, _never) == NO_SUCH_FILE
    assert found[str(tmp_path)] == Unreachable(DIRECTORY) == local_state(str(tmp_path))
    assert scanned_state(str(tmp_path)) is None
    assert state_now(str(tmp_path), _never) == DIRECTORY
