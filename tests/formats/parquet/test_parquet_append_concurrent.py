"""Writers of one local reference set take turns (JSON and Parquet): real processes, one held
inside its critical section (the `fault_hook` step mechanism, over a pipe) while the other
starts; the second must wait for the lock, then append onto the first one's result, so the
set equals combining everything at once. No sleeps: the children report each step."""

from __future__ import annotations

import queue
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from appendkit import leftovers, synthetic_file

import refzarr
from childkit import child_env
from refzarr import RefGroup

WAIT = "waiting for the lock"

CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import refzarr
    from refzarr.formats import atomic
    from appendkit import synthetic_file

    folder, target, first, steps, hold, options = sys.argv[1:7]
    def report(name):
        print(name, flush=True)
        if name == hold:
            sys.stdin.readline()  # held until the test lets it go on
    atomic.fault_hook = report
    print("ready", flush=True)
    sys.stdin.readline()  # started by the test (its imports done meanwhile)
    group = synthetic_file(Path(folder), int(first), int(steps))
    refzarr.write(group, target, **json.loads(options))
    print("done", flush=True)
    """
)


class Writer:
    """A child process writing, reporting each step on a line of its stdout; started ahead,
    it writes when the test tells it to (`go_on`)."""

    def __init__(self, tmp_path: Path, target: Path, part: tuple[int, int], **how: object) -> None:
        import json

        hold = str(how.pop("hold", ""))
        env = child_env(**({"REFZARR_NO_EXCHANGE": "1"} if how.pop("no_exchange", False) else {}))
        command = [sys.executable, "-c", CHILD, str(tmp_path / "data"), str(target)]
        command += [str(part[0]), str(part[1]), hold, json.dumps(how)]
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:
                self.lines.put(line.strip())
        self.lines.put("<exited>")

    def steps_until(self, wanted: str) -> list[str]:
        """The steps reported up to ``wanted`` (fails when the child exits or hangs first)."""
        seen: list[str] = []
        while not seen or seen[-1] != wanted:
            seen.append(self.lines.get(timeout=120))
            assert seen[-1] != "<exited>", f"exited before {wanted!r}: {seen}"
        return seen

    def go_on(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def finish(self) -> list[str]:
        steps = self.steps_until("done")
        assert self.process.wait(timeout=120) == 0
        self.close()
        return steps

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.reader.join(timeout=120)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    return tmp_path / "data"


def parts(data: Path, *spans: tuple[int, int]) -> list[RefGroup]:
    return [synthetic_file(data, first, steps) for first, steps in spans]


def combined(groups: list[RefGroup]) -> RefGroup:
    return refzarr.combine(groups, concat_dims=["time"])


@pytest.fixture
def children() -> Iterator[list[Writer]]:
    started: list[Writer] = []
    yield started
    for writer in started:  # a failed test leaves no child behind
        writer.close()


def race(first: Writer, second: Writer, hold: str) -> list[str]:
    """Hold ``first`` at step ``hold``, start ``second`` until it waits for the lock, let
    both finish; the steps ``second`` reported up to its wait."""
    first.steps_until("ready")
    first.go_on()
    first.steps_until(hold)
    second.steps_until("ready")
    second.go_on()
    before = second.steps_until(WAIT)
    first.go_on()
    first.finish()
    assert WAIT not in second.finish()  # it waited once, then went through
    return before


CASES = {
    "json": ("refs.json", {}),
    "parquet": ("refs.parq", {}),
    "parquet, set aside": ("refs.parq", {"no_exchange": True}),  # no renameat2 exchange
    "parquet, whole set rewritten": ("refs.parq", {"record_size": 3}),
}


@pytest.mark.filterwarnings(
    "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
)
@pytest.mark.parametrize("case", list(CASES))
def test_a_second_appender_waits_and_appends_onto_the_first(
    tmp_path: Path, data: Path, case: str, children: list[Writer]
) -> None:
    name, how = CASES[case]
    target = tmp_path / name
    refzarr.write(combined(parts(data, (0, 2), (2, 1))), target, record_size=2)
    children += [
        Writer(tmp_path, target, (3, 2), append_dim="time", hold="written", **how),
        Writer(tmp_path, target, (5, 1), append_dim="time", **how),
    ]
    # the first has read the set and written the new one beside it; the second reads
    # nothing before it holds the lock
    assert race(*children, hold="written") == [WAIT]
    expected = combined(parts(data, (0, 2), (2, 1), (3, 2), (5, 1)))
    assert refzarr.read(target) == expected
    assert leftovers(tmp_path, spare=True) == []


@pytest.mark.parametrize("name", ["refs.json", "refs.parq"])
def test_appenders_creating_a_set_take_turns(
    tmp_path: Path, data: Path, name: str, children: list[Writer]
) -> None:
    # nothing at the target yet: the first appender holds the folder's lock while creating it
    target = tmp_path / name
    children += [
        Writer(tmp_path, target, (0, 2), append_dim="time", hold="written"),
        Writer(tmp_path, target, (2, 3), append_dim="time"),
    ]
    assert race(*children, hold="written") == [WAIT]
    assert refzarr.read(target) == combined(parts(data, (0, 2), (2, 3)))


@pytest.mark.parametrize("name", ["refs.json", "refs.parq"])
def test_a_whole_write_waits_for_an_append_in_progress(
    tmp_path: Path, data: Path, name: str, children: list[Writer]
) -> None:
    # the append read the old set: a whole write exchanged meanwhile would be lost under it
    target = tmp_path / name
    refzarr.write(combined(parts(data, (0, 2))), target)
    children += [
        Writer(tmp_path, target, (2, 2), append_dim="time", hold="written"),
        Writer(tmp_path, target, (10, 3)),
    ]
    assert race(*children, hold="written")[-2:] == ["written", WAIT]  # before its exchange
    assert refzarr.read(target) == synthetic_file(data, 10, 3)  # the later write, whole


def test_an_append_waits_for_a_whole_write_in_progress(
    tmp_path: Path, data: Path, children: list[Writer]
) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(combined(parts(data, (0, 2))), target)
    children += [
        Writer(tmp_path, target, (10, 3), hold="exchanged"),  # inside its exchange
        Writer(tmp_path, target, (13, 2), append_dim="time"),
    ]
    assert race(*children, hold="exchanged") == [WAIT]
    assert refzarr.read(target) == combined(parts(data, (10, 3), (13, 2)))


@pytest.mark.parametrize("name", ["refs.json", "refs.parq"])
def test_a_set_replaced_on_an_object_store_meanwhile_is_refused(
    data: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nothing is locked off the local disk: the set's version seen before reading it is
    # compared before the move; the other writer's set stands, nothing of this one is left
    import fsspec

    from refzarr.formats import atomic

    target = f"memory://concurrent/{name}"
    refzarr.write(combined(parts(data, (0, 2))), target)
    other = synthetic_file(data, 10, 3)

    def other_writer(step: str) -> None:
        if step == "written":
            monkeypatch.setattr(atomic, "fault_hook", None)
            refzarr.write(other, target)  # a whole write by another process, say

    monkeypatch.setattr(atomic, "fault_hook", other_writer)
    try:
        with pytest.raises(refzarr.ConcurrentWriteError, match="another writer replaced"):
            refzarr.write(synthetic_file(data, 2, 2), target, append_dim="time")
        assert refzarr.read(target) == other
        assert fsspec.filesystem("memory").ls("/concurrent", detail=False) == [
            f"/concurrent/{name}"
        ]
    finally:
        fsspec.filesystem("memory").rm("/concurrent", recursive=True)
