"""``refzarr scan`` combining the files in batches as they are scanned (`CombineFold`, forced
here to batches of 2): the same bytes as one combine, the same messages."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dailykit import write_day, write_days
from refzarr.cli import main
from refzarr.parallel import fold


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_days(tmp_path_factory.mktemp("days"), 7)


def _digest(path: Path) -> str:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digest = hashlib.md5()
    for file in files:
        digest.update(file.relative_to(path.parent).as_posix().encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _scan(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, size: int, *argv: object
) -> tuple[int, str, str]:
    monkeypatch.setattr(fold, "FOLD_SIZE", size)
    status = main(["scan", *(str(a) for a in argv), "--workers", "1"])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("suffix", [".json", ".parq"])
@pytest.mark.parametrize(
    "options",
    [["--concat-dim", "time"], ["--concat-dim", "time", "--identical-dim", "lat,lon"]],
    ids=["concat", "identical"],
)
def test_batches_write_the_same_set(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    days: list[Path],
    tmp_path: Path,
    suffix: str,
    options: list[str],
) -> None:
    batched: list[bool] = []
    result = fold.CombineFold.result

    def spied(self: fold.CombineFold) -> object:
        batched.append(self.folded)
        return result(self)

    monkeypatch.setattr(fold.CombineFold, "result", spied)
    found = []
    for size in (2, 1000):
        out_path = tmp_path / str(size) / f"set{suffix}"
        out_path.parent.mkdir()
        status, out, err = _scan(capsys, monkeypatch, size, *days, *options, "-o", out_path)
        assert (status, err) == (0, "")
        found.append((out.replace(str(out_path), "OUT"), _digest(out_path)))
    assert batched == [True, False]
    assert found[0] == found[1]
    assert found[0][0] == "OUT: 7 files along time\n"


@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_batches_append_the_same(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    days: list[Path],
    tmp_path: Path,
    suffix: str,
) -> None:
    found = []
    for size in (2, 1000):
        out_path = tmp_path / str(size) / f"set{suffix}"
        out_path.parent.mkdir()
        first = _scan(capsys, monkeypatch, 1000, *days[:2], "--concat-dim", "time", "-o", out_path)
        assert first[0] == 0
        status, out, err = _scan(
            capsys, monkeypatch, size, *days[2:], "--append-dim", "time", "-o", out_path
        )
        assert (status, err) == (0, "")
        found.append((out.replace(str(out_path), "OUT"), _digest(out_path)))
    assert found[0] == found[1]
    assert found[0][0] == "OUT: 5 files appended along time (length 2 -> 7)\n"


def test_batches_fail_as_one_combine(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    days: list[Path],
    tmp_path: Path,
) -> None:
    """A day given twice, in another batch: the error names both files, as before."""
    again = write_day(tmp_path / "air_again.nc", 1)
    said = []
    for size in (2, 1000):
        target = tmp_path / f"{size}.json"
        status, out, err = _scan(
            capsys, monkeypatch, size, *days, again, "--concat-dim", "time", "-o", target
        )
        assert (status, out) == (1, "")
        assert not target.exists()
        said.append(err)
    assert said[0] == said[1]
    assert "duplicate coordinate values" in said[0]
    assert str(again) in said[0]


def test_batches_report_skipped_files(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    days: list[Path],
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.nc"
    bad.write_bytes(b"not HDF5" * 20)
    said = []
    for size in (2, 1000):
        target = tmp_path / f"{size}.json"
        argv = [*days, bad, "--concat-dim", "time", "--skip-errors", "-o", target]
        status, out, err = _scan(capsys, monkeypatch, size, *argv)
        assert status == 0
        said.append((out.replace(str(target), "OUT"), err))
    assert said[0] == said[1]
    assert said[0][0] == "OUT: 7 files along time, 1 skipped\n"
    assert said[0][1].startswith(f"refzarr: skipped {bad}: ")
