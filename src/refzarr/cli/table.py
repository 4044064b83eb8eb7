"""Plain-text tables and sizes for the command's human-readable output."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["human_bytes", "plural", "table"]


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: frozenset[str]) -> str:
    """Rows under ``header``, columns padded, the ``numeric`` columns right-aligned."""
    cells = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        parts = [
            text.rjust(width) if name in numeric else text.ljust(width)
            for name, text, width in zip(header, row, widths, strict=True)
        ]
        lines.append("  " + "  ".join(parts).rstrip())
    return "\n".join(lines)


def human_bytes(count: int) -> str:
    """``1536`` -> ``"1.5 KiB"`` (bytes below 1 KiB as they are)."""
    if count < 1024:
        return f"{count} B"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            break
    return f"{value:.1f} {unit}"


def plural(count: int, noun: str) -> str:
    """``"1 chunk"``, ``"3 chunks"`` (thousands separated)."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
