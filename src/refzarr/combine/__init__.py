"""Combining many files' reference groups into one dataset: concatenate, stack, merge.

`combine` is the entry point (also ``refzarr.combine``); coordinate specs say where each
file's coordinate values come from. See docs/combine.md.
"""

from refzarr.combine.api import combine, merge
from refzarr.combine.specs import (
    CoordSpec,
    CoordSpecLike,
    FromAttribute,
    FromCallable,
    FromData,
    FromRegex,
)

__all__ = [
    "CoordSpec",
    "CoordSpecLike",
    "FromAttribute",
    "FromCallable",
    "FromData",
    "FromRegex",
    "combine",
    "merge",
]
