"""Version 1 templates: which URL directories to name, and URLs rewritten to use the names.

A directory (a URL up to its last ``/``) becomes a template when naming it saves bytes: every
chunk reference to a URL in it shrinks from ``"s3://bucket/run1/file.nc"`` to
``"{{a}}file.nc"``, and the template costs one entry. Names are short (``a``..``Z``, then
``aa``...), skipping words that jinja2 or Python reserve.

Once a set has templates, a reader renders every URL that contains ``{{`` (fsspec with
``str.format`` or jinja2, refzarr with its restricted renderer), so a URL with braces or
control characters is never templated, and one that contains ``{{`` is written with each
brace, CR and LF replaced by a template holding that character (``{{b}}`` -> ``{``): all
three renderers give such a URL back unchanged (jinja2 would otherwise drop a trailing
newline and turn CR into LF).
"""

from __future__ import annotations

import itertools
import keyword
import string
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from refzarr.formats.kerchunk_json.write_lines import (
    arrow_numbers,
    arrow_strings,
    join,
    numpy_view,
    to_arrow,
)
from refzarr.model.manifest import ManifestBlock

__all__ = ["TemplatePlan", "plan_templates", "split_urls", "template_names"]

_RESERVED = frozenset(
    [*keyword.kwlist, *keyword.softkwlist, "true", "false", "none", "self", "loop", "caller"]
)
_RENDERED_SPECIALS = "{}\r\n"  # what a URL rendered by jinja2 cannot hold literally
_UNTEMPLATABLE = r"[{}\x00-\x1f]"
_INDEX = arrow_numbers(np.arange(2, dtype=np.int64))
"""Arrow scalars 0 and 1 (list indices; a Python int would be converted through pandas)."""
_TAG_BYTES = 4  # "{{" and "}}"
_ENTRY_BYTES = 7  # quotes, colon, comma and newline of a template entry


def template_names() -> Iterator[str]:
    """Short template names: ``a``..``z``, ``A``..``Z``, ``aa``... (reserved words skipped)."""
    letters = string.ascii_lowercase + string.ascii_uppercase
    for size in itertools.count(1):
        for chars in itertools.product(letters, repeat=size):
            name = "".join(chars)
            if name not in _RESERVED:
                yield name


@dataclass(frozen=True, slots=True)
class TemplatePlan:
    """The templates of a Version 1 reference set and how URLs use them.

    ``templates`` maps name -> text in output order; ``prefixes`` maps a directory to its
    template name; ``escapes`` maps a character to the name of the template holding it (for
    the URLs that contain ``{{``).
    """

    templates: dict[str, str] = field(default_factory=dict)
    prefixes: dict[str, str] = field(default_factory=dict)
    escapes: dict[str, str] = field(default_factory=dict)

    def url_forms(self, urls: Sequence[str]) -> Any:
        """``urls`` as they are written in ``refs`` (a list, or an Arrow string array)."""
        array = to_arrow(urls)
        if array is None:  # a lone surrogate: such URLs are simply never templated
            return [self.literal(u) for u in urls]
        forms = array
        if self.prefixes:
            directory, name = split_urls(array)
            index = pc.index_in(directory, value_set=arrow_strings(list(self.prefixes)))
            tags = arrow_strings([f"{{{{{n}}}}}" for n in self.prefixes.values()])
            forms = pc.coalesce(join(tags.take(index), name, ""), array)
        if not self.escapes:
            return forms
        braced = pc.match_substring(array, "{{")
        if not pc.any(braced).as_py():
            return forms
        escaped = [self.literal(u) for u in pc.filter(array, braced).to_pylist()]
        return pc.replace_with_mask(forms, braced, arrow_strings(escaped))

    def literal(self, url: str) -> str:
        """An untemplated URL as written in ``refs``: escaped when it contains ``{{``."""
        if "{{" not in url:
            return url
        return "".join(f"{{{{{self.escapes[c]}}}}}" if c in self.escapes else c for c in url)


def plan_templates(blocks: Iterable[ManifestBlock]) -> TemplatePlan:
    """The templates worth writing for the references of ``blocks``."""
    directories, counts = [], []
    specials: set[str] = set()
    for block in blocks:
        if not block.paths:
            continue
        array = to_arrow(block.paths)
        if array is None:
            specials.update(_specials(block.paths))
            continue
        braced = pc.match_substring(array, "{{")
        if pc.any(braced).as_py():
            specials.update(_specials(pc.filter(array, braced).to_pylist()))
        ids = block.path_id[block.path_id >= 0]
        directories.append(split_urls(array)[0])
        counts.append(np.bincount(ids, minlength=len(block.paths)).astype(np.int64))
    names = template_names()
    escapes = {char: next(names) for char in _RENDERED_SPECIALS if char in specials}
    prefixes = _choose_prefixes(directories, counts, names)
    templates = {name: char for char, name in escapes.items()}
    templates.update((name, prefix) for prefix, name in prefixes.items())
    return TemplatePlan(templates, prefixes, escapes)


def split_urls(urls: Any) -> tuple[Any, Any]:
    """(directory with its trailing ``/``, file name) of each URL of an Arrow string array.

    Both are null for a URL that may not be templated (no ``/``, braces, control characters).
    """
    rooted = join("/", urls, "")  # so that every URL splits in two
    halves = pc.split_pattern(rooted, "/", max_splits=1, reverse=True)
    directory = join(pc.utf8_slice_codeunits(pc.list_element(halves, _INDEX[0]), 1), "/", "")
    allowed = pc.and_(
        pc.match_substring(urls, "/"), pc.invert(pc.match_substring_regex(urls, _UNTEMPLATABLE))
    )
    null = pa.nulls(1, pa.string())[0]
    return pc.if_else(allowed, directory, null), pc.if_else(
        allowed, pc.list_element(halves, _INDEX[1]), null
    )


def _specials(urls: Iterable[str]) -> set[str]:
    """The characters needing a template in those of ``urls`` that contain ``{{``."""
    return {c for url in urls if "{{" in url for c in _RENDERED_SPECIALS if c in url}


def _choose_prefixes(
    directories: list[Any], counts: list[npt.NDArray[np.int64]], names: Iterator[str]
) -> dict[str, str]:
    """Directory -> name for the directories whose template saves bytes, biggest saving first."""
    if not directories:
        return {}
    every = pa.concat_arrays(directories)
    valid = pc.is_valid(every)
    found = pc.dictionary_encode(pc.filter(every, valid))  # (pyarrow's group_by imports pandas)
    unique = found.dictionary
    count = np.zeros(len(unique), dtype=np.int64)
    used = numpy_view(pc.filter(arrow_numbers(np.concatenate(counts)), valid), np.int64)
    np.add.at(count, numpy_view(found.indices, np.int32), used)
    size = numpy_view(pc.binary_length(unique), np.int32).astype(np.int64)
    rank = np.empty(len(unique), dtype=np.int64)  # of each directory in (byte) order
    rank[numpy_view(pc.sort_indices(unique), np.uint64)] = np.arange(len(unique))
    order = np.lexsort((rank, -(count * size)))  # biggest saving first, then by name
    count, size = count[order], size[order]
    # counted with 3-letter names (140,000 names have at most 3 letters): a directory kept here
    # saves bytes whichever of those names it gets
    chosen = np.flatnonzero(_saving(count, size, 3) > 0)
    labels = list(itertools.islice(names, chosen.size))
    name_bytes = np.array([len(n) for n in labels], dtype=np.int64)
    keep = _saving(count[chosen], size[chosen], name_bytes) > 0
    dirs = unique.take(arrow_numbers(order[chosen[keep]])).to_pylist()
    # dropping one only shortens the names after it, which keeps their savings positive
    return dict(zip(dirs, labels, strict=False))


def _saving(count: Any, size: Any, name_bytes: Any) -> Any:
    """Bytes saved by naming a directory of ``size`` bytes used by ``count`` references."""
    return count * (size - name_bytes - _TAG_BYTES) - (size + name_bytes + _ENTRY_BYTES)
