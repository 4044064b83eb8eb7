"""`DeferredJSON`: a frozen JSON object made when first used (a set's record of sources)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from refzarr.model import RefGroup
from refzarr.model.frozen import DeferredJSON, FrozenDict, freeze_json, plain_json, plain_mapping

DOCUMENT = {"version": 1, "scans": [{"url": "/a.nc", "files": {"/a.nc": {"size": 3}}}]}


class Counting:
    """A loader that counts its calls, failing the first ``failures`` of them."""

    def __init__(self, failures: int = 0) -> None:
        self.calls = 0
        self.failures = failures

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.failures:
            raise OSError("not now")
        return {"version": 1, "scans": [{"url": "/a.nc", "files": {"/a.nc": {"size": 3}}}]}


def test_loaded_at_first_use_only_once() -> None:
    load = Counting()
    deferred = DeferredJSON(load)
    group = RefGroup(sources=deferred)
    assert group.sources is deferred  # kept as it is: frozen when used
    assert load.calls == 0
    assert not deferred.loaded
    assert deferred["scans"][0]["url"] == "/a.nc"
    assert deferred == DOCUMENT
    assert deferred.loaded
    assert len(deferred) == 2
    assert "scans" in deferred
    assert load.calls == 1


def test_frozen_when_used() -> None:
    deferred = DeferredJSON(document=DOCUMENT)
    assert isinstance(deferred["scans"], tuple)
    assert isinstance(deferred["scans"][0], FrozenDict)
    assert hash(deferred) == hash(freeze_json(DOCUMENT))
    assert freeze_json(deferred) is deferred


def test_read_unfrozen_by_lookups_and_writers() -> None:
    deferred = DeferredJSON(document=DOCUMENT)
    assert plain_mapping(deferred) is DOCUMENT
    assert plain_json(deferred) is DOCUMENT
    assert plain_json(freeze_json(DOCUMENT)) == DOCUMENT


def test_a_failed_load_is_tried_again() -> None:
    load = Counting(failures=1)
    deferred = DeferredJSON(load)
    with pytest.raises(OSError, match="not now"):
        deferred.get("version")
    assert not deferred.loaded
    assert deferred.get("version") == 1
    assert load.calls == 2


def test_pickled_with_its_document_not_its_loader() -> None:
    deferred = DeferredJSON(lambda: dict(DOCUMENT))  # a lambda does not pickle
    back = pickle.loads(pickle.dumps(RefGroup(sources=deferred)))
    assert isinstance(back.sources, DeferredJSON)
    assert back.sources == DOCUMENT


def test_a_loader_or_a_document() -> None:
    with pytest.raises(TypeError, match="a loader or a document"):
        DeferredJSON()
    with pytest.raises(TypeError, match="no JSON object"):
        DeferredJSON(lambda: [1, 2]).raw()  # type: ignore[arg-type, return-value]
