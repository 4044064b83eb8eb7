"""Scanning damaged files in one child process with a hard timeout, one report per file.

A crash in a format's C library must fail a test, not kill pytest, and a hang must fail it in
bounded time: `scan_in_child` runs `refzarr.scan` on every case in one child process, which
prints a "started" line before each file and its outcome after, so a file the child never
finished (a hang, a crash) is named.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["Outcome", "scan_in_child"]

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
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
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
