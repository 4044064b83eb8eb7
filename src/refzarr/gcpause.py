"""Pausing Python's cyclic garbage collector while many long-lived objects are made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off (reference counting still frees objects),
    and turn it back on after only if it was on before (so nested uses are harmless).

    Building thousands of objects that all live on (unpickled scan results, a combined
    manifest) sets off collections that walk every object the caller already holds, again
    and again; none of what is made here is cyclic garbage worth collecting meanwhile.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
