"""Array names (astropy's ``hdu.name``, ``_<EXTVER>`` when shared, ``HDU<i>`` when empty) and
dimension names shared between HDUs of equal sizes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Dimensions", "array_names"]


def array_names(names: Sequence[str], versions: Sequence[int]) -> list[str]:
    """One array name per HDU: its name, ``<name>_<EXTVER>`` when several HDUs share the
    name, ``HDU<i>`` when it has none (a name already taken gets ``_<i>`` appended)."""
    counts = Counter(n for n in names if n)
    out: list[str] = []
    taken: set[str] = set()
    for index, (name, version) in enumerate(zip(names, versions, strict=True)):
        candidate = name if name and counts[name] == 1 else f"{name}_{version}" if name else ""
        if not candidate:
            candidate = f"HDU{index}"
        if candidate in taken:
            candidate = f"{candidate}_{index}"
        taken.add(candidate)
        out.append(candidate)
    return out


@dataclass
class Dimensions:
    """Dimension names of one file: a name means one length; another length gets the name
    suffixed with ``_<array name>``."""

    lengths: dict[str, int] = field(default_factory=dict)

    def name(self, base: str, length: int, array: str) -> str:
        """``base`` when free or of this length, else ``<base>_<array>``."""
        known = self.lengths.setdefault(base, length)
        if known == length:
            return base
        suffixed = f"{base}_{array}"
        self.lengths.setdefault(suffixed, length)
        return suffixed

    def names(self, bases: Sequence[str], shape: Sequence[int], array: str) -> tuple[str, ...]:
        """One name per axis."""
        return tuple(self.name(b, n, array) for b, n in zip(bases, shape, strict=True))
