"""Pickling the frozen slots dataclasses of the model as a plain tuple of their field values.

Python's own state for a frozen dataclass with slots is a dict rebuilt with a
``dataclasses.fields`` call per object, about half the cost of unpickling a scanned file in
the parent of a process pool. Unpickling skips ``__post_init__`` either way.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["tuple_state"]

T = TypeVar("T")


def tuple_state(cls: type[T]) -> type[T]:
    """Class decorator (outside ``@dataclass``): pickle ``cls`` as its fields' values.

    Fields left out of ``__init__`` (``init=False``: state an object keeps for itself, such
    as `RefGroup`'s dask token) are not pickled, and may be unset in objects made without
    ``__init__`` (a copy is a new object)."""
    names = tuple(f.name for f in dataclasses.fields(cls) if f.init)  # type: ignore[arg-type]
    setter = object.__setattr__

    def __getstate__(self: Any) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in names])

    def __setstate__(self: Any, state: tuple[Any, ...] | dict[str, Any]) -> None:
        pairs = state.items() if isinstance(state, dict) else zip(names, state, strict=True)
        for name, value in pairs:  # a dict: the state Python's dataclasses pickle
            setter(self, name, value)

    cls.__getstate__ = __getstate__  # type: ignore[method-assign]
    cls.__setstate__ = __setstate__  # type: ignore[attr-defined]
    return cls
