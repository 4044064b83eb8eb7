"""Child Python processes for tests: `run_python` (a fresh interpreter importing this refzarr
and the test kits), and scanning damaged files in one child process with a hard timeout, one
report per file (`scan_in_child`).

A crash in a format's C library must fail a test, not kill pytest, and a hang must fail it in
bounded time: `scan_in_child` runs `refzarr.scan` on every case in one child process, which
prints a "started" line before each file and its outcome after, so a file the child never
finished (a hang, a crash) is named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import refzarr

__all__ = ["Outcome", "child_env", "run_python", "scan_in_child"]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child Python, with ``extra`` variables: its
    ``PYTHONPATH`` puts the refzarr under test first, then this process's ``sys.path`` (the
    test kits), so the child imports what the test does."""
    source = str(Path(refzarr.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([source, *sys.path]), **extra}


def run_python(
    *argv: str,
    input: str | None = None,
    timeout: float = 120,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python *argv`` (``"-c", code, ...``) in a fresh interpreter, its output captured as
    text, not checked; ``env`` extra variables (`child_env`); `subprocess.TimeoutExpired`
    after ``timeout`` seconds."""
    return subprocess.run(
        [sys.executable, *argv],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=child_env(**(env or {})),
    )


_CHILD = r"""
import json, sys
import refzarr

for case in json.loads(sys.stdin.read()):
    print(json.dumps({"id": case["id"], "started": True}), flush=True)
    try:
        group = refzarr.scan(case["url"], storage_options=case.get("options"))
        outcome = {"outcome": "result", "arrays": [p for p, _ in group.arrays()]}
    except Exception as exc:  # reported, not raised: the test judges it
        bases = [c.__name__ for c in type(exc).__mro__]
        outcome = {"outcome": "error", "type": type(exc).__name__, "bases": bases,
                   "message": str(exc)}
    print(json.dumps({"id": case["id"], **outcome}), flush=True)
"""


@dataclass(frozen=True)
class Outcome:
    """What the child reported for one file.

    ``outcome`` is ``"result"``, ``"error"``, ``"unfinished"`` (started, never ended: the
    child hung or crashed there; ``message`` says how the child ended) or ``"no report"``
    (never started: the child ended before it).
    """

    outcome: str
    type: str = ""
    bases: tuple[str, ...] = ()
    message: str = ""
    arrays: tuple[str, ...] = ()

    def assert_error(self, kind: str, *names: str) -> None:
        """The scan raised ``kind`` (or a subclass) whose message names every one of ``names``."""
        assert self.outcome == "error", self
        assert kind in self.bases, self
        for name in names:
            assert name in self.message, (name, self.message)


def scan_in_child(cases: list[dict[str, Any]], timeout: float) -> dict[str, Outcome]:
    """Scan each ``{"id", "url", "options"?}`` in one child process (killed after ``timeout``
    seconds); the outcome per id, every case included."""
    try:
        done = run_python("-c", _CHILD, input=json.dumps(cases), timeout=timeout)
        stdout, ended = done.stdout, f"exit code {done.returncode}: {done.stderr[-2000:]}"
    except subprocess.TimeoutExpired as exc:
        stdout, ended = _text(exc.stdout), f"still running after {timeout} s (a hang)"
    outcomes: dict[str, Outcome] = {}
    for line in stdout.splitlines():
        report = json.loads(line)
        name = report.pop("id")
        if report.pop("started", False):
            outcomes[name] = Outcome("unfinished", message=ended)
            continue
        outcomes[name] = Outcome(
            report.pop("outcome"),
            report.get("type", ""),
            tuple(report.get("bases", ())),
            report.get("message", ""),
            tuple(report.get("arrays", ())),
        )
    for case in cases:  # the child ended before this file
        outcomes.setdefault(case["id"], Outcome("no report", message=ended))
    return outcomes


def _text(data: bytes | str | None) -> str:
    return data.decode() if isinstance(data, bytes) else (data or "")
