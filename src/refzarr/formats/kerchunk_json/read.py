"""Kerchunk JSON reference sets (Version 0 and 1) -> `RefGroup`, parsed column-wise.

`group_from_json` reads the document's bytes without building a Python object per chunk: runs
of regular reference entries are recognised and decoded with numpy (`json_window`,
`json_bulk`), the few other entries (metadata, inline data, unusual references) are parsed one
by one (`json_walk`) and handled exactly as the per-key reader
`refzarr.model.kerchunk.group_from_kerchunk` handles them. Whatever the column-wise reader
does not understand (a chunk given twice, invalid JSON, rare shapes of Version 1) is handed
whole to that per-key reader, so both always agree.

A key given twice in any JSON object is an error (``json.loads`` would keep the last value in
silence): the per-key path rejects it while parsing, the column-wise path hands it over.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from refzarr.errors import RefFormatError
from refzarr.formats.kerchunk_json.bulk import BulkDecoder, Slot, UrlTable
from refzarr.formats.kerchunk_json.byte_words import I64, Bytes, Unhandled, string_value
from refzarr.formats.kerchunk_json.walk import REFS, TOP, DuplicateKeyError, Walker, strict_object
from refzarr.formats.kerchunk_json.window import Window
from refzarr.model.group import RefGroup
from refzarr.model.hierarchy import (
    Hierarchy,
    assemble_group,
    is_metadata_key,
    parse_hierarchy,
    parse_metadata_value,
)
from refzarr.model.kerchunk import decode_inline, group_from_kerchunk, parse_reference
from refzarr.model.manifest import ChunkManifest
from refzarr.model.meta import ArrayMeta
from refzarr.model.templates import expand_gen, expand_v1, render

__all__ = ["fast_group_from_json", "group_from_json", "load_json", "normalise_v0"]

WINDOW_BYTES = 4 * 2**20
"""Bytes of the document analysed at once (bounds the memory of the column-wise reader)."""

_T = TypeVar("_T")


def load_json(data: bytes, *, where: str) -> Any:
    """Parse JSON text with errors that name the file; a key given twice is an error."""
    try:
        return json.loads(data, object_pairs_hook=strict_object)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RefFormatError(f"{where}: not valid JSON ({exc})") from exc
    except DuplicateKeyError as exc:
        raise RefFormatError(
            f"{where}: key {exc.key!r} appears more than once in a JSON object; keys must be unique"
        ) from exc


def group_from_json(data: bytes, *, target: str | None, where: str) -> RefGroup:
    """The `RefGroup` a JSON reference set describes.

    Parameters
    ----------
    data
        The document (uncompressed).
    target
        URL for references whose URL is null.
    where
        The file's name, used in error messages.

    Returns
    -------
    RefGroup
        The same group `refzarr.model.kerchunk.group_from_kerchunk` builds from the parsed
        document.

    Raises
    ------
    RefFormatError
        The document is not valid JSON, not a reference set, or does not describe a Zarr
        hierarchy; the message names ``where`` and, where there is one, the key.
    """
    try:
        return fast_group_from_json(data, target=target, where=where)
    except Unhandled:
        pass  # leave the handler first, so that the fast reader's memory is released
    return _read_per_key(data, target=target, where=where)


def fast_group_from_json(
    data: bytes, *, target: str | None, where: str, window_bytes: int = WINDOW_BYTES
) -> RefGroup:
    """`group_from_json` by the column-wise reader alone.

    Raises
    ------
    Unhandled
        The document has a shape this reader leaves to the per-key reader.
    """
    doc = Bytes(data)
    collector = _Collector(doc)
    Walker(doc, collector, window_bytes).walk()
    return _with_file(where, lambda: collector.assemble(target=target, where=where))


def _read_per_key(data: bytes, *, target: str | None, where: str) -> RefGroup:
    """The per-key reader on the whole document: ``json.loads``, then `group_from_kerchunk`."""
    refs = load_json(data, where=where)
    if not isinstance(refs, Mapping):
        raise RefFormatError(f"{where}: a reference set must be a JSON object")
    return _with_file(where, lambda: group_from_kerchunk(refs, target=target, where=where))


def _with_file(where: str, build: Callable[[], _T]) -> _T:
    """Run ``build``; RefFormatErrors that do not name the file yet are prefixed with it."""
    try:
        return build()
    except RefFormatError as exc:
        if where and not str(exc).startswith(f"{where}: "):
            raise RefFormatError(f"{where}: {exc}") from exc
        raise


def _at(where: str, key: str) -> str:
    return f"{where}: key {key!r}" if where else f"key {key!r}"


@dataclass(slots=True)
class _Entry:
    """An entry held as Python values: where its key is in the document, and its value."""

    position: int
    value: Any


@dataclass(frozen=True)
class _Deferred:
    """Regular entries of a window whose array was not known when the window was read."""

    container: str
    start: int
    size: int
    keys: I64


class _Collector:
    """Gathers what the walker reports, then builds the group (see `assemble`)."""

    def __init__(self, doc: Bytes) -> None:
        self.doc = doc
        self.urls = UrlTable()
        self.bulk = BulkDecoder(doc, self.urls)
        self.slots: dict[str, Slot] = {}
        self.entries: dict[str, dict[str, _Entry]] = {TOP: {}, REFS: {}}
        self.bulk_in: set[str] = set()
        self.refs_at: int | None = None
        self.deferred: list[_Deferred] = []

    # -- what the walker reports --------------------------------------------------------------

    def entry(self, container: str, key: str, value: Any, position: int) -> None:
        found = self.entries[container]
        if key in found or (container == TOP and key == "refs" and self.refs_at is not None):
            raise Unhandled(f"key {key!r} given twice")
        found[key] = _Entry(position, value)
        if key.rpartition("/")[2] == ".zarray":
            self._register(key, value)

    def refs_object(self, position: int) -> None:
        if self.refs_at is not None or "refs" in self.entries[TOP]:
            raise Unhandled("key 'refs' given twice")
        self.refs_at = position

    def regular(self, container: str, window: Window, keys: I64) -> None:
        self.bulk_in.add(container)
        decoded = self.bulk.decode(window, keys, self.slots)
        for position, key, value, _ in decoded.entries:
            self.entry(container, key, value, position)
        if decoded.deferred.shape[0]:
            self.deferred.append(_Deferred(container, window.start, window.size, decoded.deferred))

    def _register(self, key: str, value: Any) -> None:
        """Learn an array's chunk grid early, so that its chunks decode column-wise."""
        path = key.rpartition("/")[0]
        try:
            meta = ArrayMeta.from_zarr_v2(parse_metadata_value(key, value))
        except Exception:  # any failure: parse_hierarchy reports it, in the per-key order
            return
        self._add_slot(path, meta)

    def _add_slot(self, path: str, meta: ArrayMeta) -> None:
        self.slots[path] = Slot(path, meta.grid_shape, meta.dimension_separator, len(self.slots))

    # -- building the group -------------------------------------------------------------------

    def assemble(self, *, target: str | None, where: str) -> RefGroup:
        """The group, with the per-key reader's checks in the per-key reader's order."""
        entries, templates, gen = self._version()
        texts = self._url_texts()
        if templates is not None:
            self._render(entries, texts, templates)
            _merge_gen(entries, gen, templates, self.doc.size)
        ordered = sorted(entries.items(), key=lambda item: item[1].position)
        metadata = {key: e.value for key, e in ordered if is_metadata_key(key)}
        hierarchy = parse_hierarchy(metadata, where=where)
        self._reconcile(hierarchy)
        self._redo_deferred(entries, texts)
        ordered = sorted(entries.items(), key=lambda item: item[1].position)
        self._per_key(ordered, hierarchy, texts, target=target, where=where)
        finals, final_id = self._final_urls(texts)
        manifests: dict[str, ChunkManifest] = {}
        for path in hierarchy.arrays:
            manifest = self.slots[path].columns.manifest(finals, final_id)
            if manifest is not None:
                manifests[path] = manifest
        return assemble_group(hierarchy, manifests, where=where)

    def _version(self) -> tuple[dict[str, _Entry], dict[str, str] | None, Any]:
        """The entries to read, and the templates and gen of a Version 1 set (else None)."""
        top = self.entries[TOP]
        if "version" not in top:
            if self.refs_at is not None or REFS in self.bulk_in:
                raise Unhandled("a Version 0 set with a 'refs' object")
            return top, None, None
        if set(top) - {"version", "templates", "gen"} or TOP in self.bulk_in:
            raise Unhandled("unusual Version 1 top level")
        fields: dict[str, Any] = {n: top[n].value for n in ("version", "templates") if n in top}
        expand_v1({**fields, "refs": {}})  # the per-key reader's checks of version and templates
        gen = top["gen"].value if "gen" in top else None
        return self.entries[REFS], dict(fields.get("templates") or {}), gen

    def _url_texts(self) -> list[str]:
        """The decoded text of every URL in the table (rendered later for Version 1)."""
        return [_json_text(url) if isinstance(url, bytes) else url for url in self.urls.urls]

    def _key_text(self, url_id: int) -> str:
        found = self.urls.first_key[url_id]
        assert found is not None
        return _json_text(self.doc.data[found[0] + 1 : found[1]])

    def _render(
        self, entries: dict[str, _Entry], texts: list[str], templates: dict[str, str]
    ) -> None:
        """Render templated URLs in document order (unique URLs of regular entries once)."""
        jobs: list[tuple[int, int, str]] = []
        for url_id, text in enumerate(texts):
            first = self.urls.first_key[url_id]
            if first is not None and "{{" in text:
                jobs.append((first[0], url_id, ""))
        for key, e in entries.items():
            value = e.value
            if isinstance(value, list) and value and isinstance(value[0], str) and "{{" in value[0]:
                jobs.append((e.position, -1, key))
        for _, url_id, key in sorted(jobs):
            if url_id >= 0:
                where = f"key {self._key_text(url_id)!r}"
                texts[url_id] = render(texts[url_id], templates, {}, where=where)
            else:
                value = entries[key].value
                entries[key].value = [render(value[0], templates, {}, where=f"key {key!r}")]
                entries[key].value += value[1:]

    def _reconcile(self, hierarchy: Hierarchy) -> None:
        """Give every array a slot; the slots learnt while walking must match the hierarchy."""
        for path, meta in hierarchy.arrays.items():
            slot = self.slots.get(path)
            if slot is None:
                self._add_slot(path, meta)
            elif slot.grid != meta.grid_shape or slot.separator != meta.dimension_separator:
                raise Unhandled(f"array {path!r} described twice")
        if set(self.slots) - set(hierarchy.arrays):
            raise Unhandled("a .zarray key that is not an array")

    def _redo_deferred(self, entries: dict[str, _Entry], texts: list[str]) -> None:
        """Decode the regular entries read before their array's metadata.

        Those left to the per-entry path take their URL as rendered by `_render`.
        """
        for job in self.deferred:
            window = Window(self.doc, job.start, job.size)
            decoded = self.bulk.decode(window, job.keys, self.slots, final=True)
            for position, key, value, url_id in decoded.entries:
                if key in entries:
                    raise Unhandled(f"key {key!r} given twice")
                entries[key] = _Entry(position, [texts[url_id], *value[1:]])
        self.deferred = []

    def _per_key(
        self,
        ordered: list[tuple[str, _Entry]],
        hierarchy: Hierarchy,
        texts: list[str],
        *,
        target: str | None,
        where: str,
    ) -> None:
        """Entries held as Python values, checked and added key by key as the per-key reader."""
        first_bad = self._empty_url_error(texts, target=target, where=where)
        inline_seen: set[tuple[str, tuple[int, ...]]] = set()
        refs: dict[str, list[tuple[tuple[int, ...], int, int, int]]] = {}
        for key, e in ordered:
            if first_bad is not None and e.position > first_bad[0]:
                break
            if is_metadata_key(key):
                continue
            path, index = hierarchy.locate_chunk(key, where=where)
            if isinstance(e.value, list):
                url, offset, length = parse_reference(key, e.value, target=target, where=where)
                whole = -1 if length is None else length
                refs.setdefault(path, []).append((index, self.urls.add(url), offset, whole))
                continue
            if (path, index) in inline_seen:
                raise Unhandled("an inlined chunk given twice")
            inline_seen.add((path, index))
            data = decode_inline(key, e.value, where=where)
            self.slots[path].columns.put_inline(self._flat(path, index), data)
        if first_bad is not None:
            raise first_bad[1]
        for path, found in refs.items():
            self._put_refs(path, found)

    def _empty_url_error(
        self, texts: list[str], *, target: str | None, where: str
    ) -> tuple[int, RefFormatError] | None:
        """The first regular entry whose URL renders empty, with the per-key reader's error."""
        for url_id, text in enumerate(texts):
            first = self.urls.first_key[url_id]
            if first is not None and not text:
                try:
                    parse_reference(self._key_text(url_id), [""], target=target, where=where)
                except RefFormatError as exc:
                    return first[0], exc
        return None

    def _flat(self, path: str, index: tuple[int, ...]) -> int:
        grid = self.slots[path].grid
        if len(index) != len(grid):
            raise Unhandled("a chunk index of the wrong length")
        flat = 0
        for i, side in zip(index, grid, strict=True):
            if not 0 <= i < side:
                raise Unhandled("a chunk lies outside the grid")
            flat = flat * side + i
        return flat

    def _put_refs(self, path: str, found: list[tuple[tuple[int, ...], int, int, int]]) -> None:
        flat = np.asarray([self._flat(path, index) for index, _, _, _ in found], np.int64)
        ids = np.asarray([url_id for _, url_id, _, _ in found], np.int64)
        offsets = np.asarray([offset for _, _, offset, _ in found], np.uint64)
        lengths = np.asarray([length for _, _, _, length in found], np.int64).astype(np.uint64)
        self.slots[path].columns.put(flat, ids, offsets, lengths)

    def _final_urls(self, texts: list[str]) -> tuple[list[str], Any]:
        """Distinct final URLs, and for each URL-table id its number among them."""
        for url in self.urls.urls[len(texts) :]:
            assert isinstance(url, str)
            texts.append(url)
        numbers: dict[str, int] = {}
        final_id = np.asarray([numbers.setdefault(t, len(numbers)) for t in texts], np.int32)
        return list(numbers), final_id


def _merge_gen(entries: dict[str, _Entry], gen: Any, templates: dict[str, str], after: int) -> None:
    """Add the references ``gen`` generates (a key already present takes the new value)."""
    for number, (key, reference) in enumerate(expand_gen(gen or [], templates)):
        if key in entries:
            entries[key].value = reference
        else:
            entries[key] = _Entry(after + 1 + number, reference)


def _json_text(raw: bytes) -> str:
    """The value of the JSON string whose bytes between the quotes are ``raw``."""
    return string_value(b'"' + raw + b'"')


def normalise_v0(refs: Mapping[str, Any], *, target: str | None, where: str) -> dict[str, Any]:
    """Validate an expanded Version 0 dict; ``base64:`` values decoded to bytes.

    As in `group_from_kerchunk`, an in-memory dict may hold references as tuples and
    ``base64:`` data as bytes.
    """
    out: dict[str, Any] = {}
    for key, value in refs.items():
        if isinstance(value, list | tuple):
            url, offset, length = parse_reference(key, value, target=target, where=where)
            out[key] = [url] if length is None else [url, offset, length]
        elif _is_base64(value):
            out[key] = decode_inline(key, value, where=where)
        elif isinstance(value, str | bytes | dict):
            out[key] = value
        else:
            raise RefFormatError(
                f"{where}: key {key!r}: a value must be text, an object or a reference list, "
                f"got {type(value).__name__}"
            )
    return out


def _is_base64(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith("base64:")
    return isinstance(value, bytes) and value.startswith(b"base64:")
