"""FITS headers written card by card (the hostile tests' damaged and bomb files)."""

from __future__ import annotations

__all__ = ["card", "fits_header"]


def card(key: str, value: object) -> bytes:
    """One 80-byte ``KEY = value`` card: a string (quoted) from column 11, any other value
    right-aligned to column 30."""
    text = str(value)
    shown = text if text.startswith("'") else f"{text:>20}"
    return f"{key:<8}= {shown}".ljust(80).encode()


def fits_header(cards: list[tuple[str, object]]) -> bytes:
    """The header of ``cards`` and an END card, padded with spaces to 2880-byte blocks."""
    block = b"".join(card(k, v) for k, v in cards) + b"END".ljust(80)
    return block + b" " * (-len(block) % 2880)
