"""`scan_many`'s process pool after fsspec started its threads (any s3fs call, e.g. listing the
files to scan): a script without an ``if __name__ == "__main__"`` guard still works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dailykit import write_day

SRC = Path(__file__).resolve().parents[2] / "src"

SCRIPT = """
import asyncio, sys, threading
import fsspec.asyn
import refzarr

async def listing():  # as s3fs's listing does: the loop thread and an executor thread
    await asyncio.get_running_loop().run_in_executor(None, lambda: None)

fsspec.asyn.sync(fsspec.asyn.get_loop(), listing)
assert threading.active_count() == 3, threading.enumerate()
groups = refzarr.scan_many(sys.argv[1:], executor="processes", progress=False)
print(len(groups), "scanned")
"""


def test_unguarded_script_scans_in_processes_beside_fsspec_threads(tmp_path: Path) -> None:
    files = [str(write_day(tmp_path / f"day{k}.nc", k)) for k in range(3)]
    script = tmp_path / "unguarded.py"  # a file: forkserver / spawn would import it again
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), *sys.path])}
    done = subprocess.run(
        [sys.executable, str(script), *files],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "3 scanned"
