"""Fixtures shared by the HDF5 scanner's tests."""

from __future__ import annotations

from typing import Any

import pytest
from h5py import h5a


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The names of the attributes HDF5 is asked to open by name (h5py reading them: what
    refzarr did not read itself)."""
    names: list[bytes] = []
    real = h5a.open

    def counting(*args: Any, **kwargs: Any) -> Any:
        names.append(args[1] if len(args) > 1 else kwargs.get("name", b""))
        return real(*args, **kwargs)

    monkeypatch.setattr(h5a, "open", counting)
    return names
