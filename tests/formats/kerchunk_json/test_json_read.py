"""Column-wise JSON reading: the same group, or the same error, as the per-key reader.

The per-key reader (``json.loads`` + `group_from_kerchunk`) is the oracle. Documents are
generated as reference dicts, serialised in the layouts writers use (``json.dumps`` default,
``indent=2``, compact, ``ujson`` with escaped slashes, non-ASCII kept), read both ways and
compared: equal groups, or RefFormatErrors with the same message. The column-wise reader is
also called on its own, with windows of a few dozen bytes, to check that it handles these
documents itself instead of handing them to the oracle.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import pickle
import string
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import ujson
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from refzarr.errors import RefFormatError
from refzarr.formats.kerchunk_json import byte_words as json_bytes
from refzarr.formats.kerchunk_json import read as json_read
from refzarr.formats.kerchunk_json.byte_words import Bytes, Unhandled
from refzarr.formats.kerchunk_json.read import fast_group_from_json, group_from_json, load_json
from refzarr.model import RefGroup
from refzarr.model.hierarchy import chunk_key
from refzarr.model.kerchunk import group_from_kerchunk
from strategies import texts

WHERE = "refs.json"
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX = 2**63 - 1

Serialiser = Callable[[dict[str, Any]], bytes]

SERIALISERS: dict[str, Serialiser] = {
    "default": lambda refs: json.dumps(refs).encode(),
    "indent": lambda refs: json.dumps(refs, indent=2).encode(),
    "compact": lambda refs: json.dumps(refs, separators=(",", ":")).encode(),
    "ujson": lambda refs: ujson.dumps(refs).encode(),  # escapes "/" as "\/"
    "unicode": lambda refs: json.dumps(refs, ensure_ascii=False, indent=1).encode(),
}


# -- the oracle and the comparison ------------------------------------------------------------


def oracle(refs: dict[str, Any], target: str | None = None) -> RefGroup | str:
    """The per-key reader's group, or its error message as the JSON reader words it."""
    try:
        return group_from_kerchunk(refs, target=target, where=WHERE)
    except RefFormatError as exc:
        message = str(exc)
        return message if message.startswith(f"{WHERE}: ") else f"{WHERE}: {message}"


def read(data: bytes, target: str | None = None, **options: Any) -> RefGroup | str:
    """The JSON reader's group or error message (column-wise reader alone with options)."""
    try:
        if options:
            return fast_group_from_json(data, target=target, where=WHERE, **options)
        return group_from_json(data, target=target, where=WHERE)
    except RefFormatError as exc:
        return str(exc)


def assert_same(
    refs: dict[str, Any], data: bytes, target: str | None = None, *, columnwise: bool = True
) -> RefGroup | str:
    """The JSON reader agrees with the oracle, and (when asked) needs no help from it."""
    expected = oracle(refs, target)
    assert read(data, target) == expected
    if columnwise:
        for window in (48, 301, json_read.WINDOW_BYTES):
            assert read(data, target, window_bytes=window) == expected
    return expected


def zarray(shape: list[int], chunks: list[int], **fields: Any) -> dict[str, Any]:
    """A ``.zarray`` document."""
    base = {"shape": shape, "chunks": chunks, "dtype": "<f8", "compressor": None}
    return {**base, "fill_value": None, "filters": None, "order": "C", "zarr_format": 2, **fields}


# -- generated reference sets -----------------------------------------------------------------

_DIRS = ["s3://bucket/data/", "gs://b/é ü/", 's3://b/"q"\\x/', "file:///tmp/", "/", ""]
_NAMES = st.text(string.ascii_letters + string.digits + 'éü_-." \\', min_size=1, max_size=4)


@functools.cache
def urls() -> st.SearchStrategy[str]:
    """URLs sharing a few directories, with quotes, backslashes, slashes and unicode."""
    return st.builds(str.__add__, st.sampled_from(_DIRS), texts(min_size=1, max_size=6))


@functools.cache
def numbers() -> st.SearchStrategy[int]:
    """Offsets and lengths, biased to the edges: 0, digit-count boundaries, 2**63 - 1."""
    edges = st.sampled_from([0, 1, 9, 10, 99999999, 100000000, 10**18, MAX - 1, MAX])
    return edges | st.integers(0, 10**9) | st.integers(0, MAX)


@st.composite
def arrays(draw: st.DrawFn, path: str) -> dict[str, Any]:
    """Metadata and chunk entries of one array at ``path`` (0-d to 3-d, "." or "/" keys)."""
    ndim = draw(st.sampled_from([0, 1, 1, 2, 2, 3]))
    grid = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    chunks = [draw(st.integers(1, 3)) for _ in grid]
    shape = [g * c - draw(st.integers(0, c - 1)) for g, c in zip(grid, chunks, strict=True)]
    separator = draw(st.sampled_from([".", ".", ".", "/"]))
    meta = zarray(shape, chunks, dimension_separator=separator)
    zattrs = {"_ARRAY_DIMENSIONS": [f"d{k}" for k in range(ndim)], "title": 'é/\\"'}
    as_text = draw(st.booleans())
    out: dict[str, Any] = {
        f"{path}/.zarray": json.dumps(meta) if as_text else meta,
        f"{path}/.zattrs": json.dumps(zattrs) if as_text else zattrs,
    }
    pool = draw(st.lists(urls(), min_size=1, max_size=3, unique=True))
    for index in np.ndindex(*grid):
        value = draw(chunk_values(tuple(pool)))
        if value is not None:
            out[chunk_key(path, tuple(int(i) for i in index), separator)] = value
    return out


@functools.cache
def chunk_values(pool: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """A reference (mostly), a whole-file reference, inline text or base64, or missing
    (built once per pool of URLs: hypothesis validates every new strategy it draws from)."""
    url = st.sampled_from(pool)
    reference = st.builds(lambda u, o, n: [u, o, n], url, numbers(), numbers())
    return st.one_of(
        reference,
        reference,
        reference,
        st.builds(lambda u: [u], url),
        st.text(string.printable, max_size=6),
        st.binary(max_size=6).map(lambda b: "base64:" + base64.b64encode(b).decode()),
        st.none(),
    )


@st.composite
def reference_sets(draw: st.DrawFn) -> dict[str, Any]:
    """Version 0 sets: nested groups of arrays; metadata first, or shuffled among chunks."""
    paths = draw(
        st.lists(
            st.builds(lambda parts: "/".join(parts), st.lists(_NAMES, min_size=1, max_size=3)),
            min_size=1,
            max_size=3,
            unique=True,
        ).filter(lambda ps: not any(a != b and b.startswith(a + "/") for a in ps for b in ps))
    )
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2}), ".zattrs": {"a": [1]}}
    for path in paths:
        refs.update(draw(arrays(path)))
    if draw(st.booleans()):
        keys = draw(st.permutations(list(refs)))
        refs = {key: refs[key] for key in keys}
    return refs


def version1(refs: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A Version 1 set: URLs starting with ``prefix`` written through a template."""
    body = {}
    for key, value in refs.items():
        if isinstance(value, list) and value[0].startswith(prefix) and prefix:
            value = ["{{p}}" + value[0][len(prefix) :], *value[1:]]
        body[key] = value
    return {"version": 1, "templates": {"p": prefix}, "refs": body}


# -- agreement on generated sets --------------------------------------------------------------


@SETTINGS
@given(reference_sets(), st.sampled_from(sorted(SERIALISERS)))
def test_same_group_as_per_key_reader(refs: dict[str, Any], layout: str) -> None:
    assert_same(refs, SERIALISERS[layout](refs))


@SETTINGS
@given(reference_sets(), st.sampled_from(["default", "ujson", "indent"]), st.sampled_from(_DIRS))
def test_version1_templates_agree(refs: dict[str, Any], layout: str, prefix: str) -> None:
    v1 = version1(refs, prefix)
    assert_same(v1, SERIALISERS[layout](v1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reference_sets(), st.data())
def test_corrupted_documents_agree(refs: dict[str, Any], data: st.DataObject) -> None:
    """Random byte edits: both readers fail alike, or both read the same group."""
    text = bytearray(SERIALISERS[data.draw(st.sampled_from(sorted(SERIALISERS)))](refs))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(text)))
        edit = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        byte = data.draw(st.sampled_from(list(b'"\\/,:[]{} 0123456789.-enul\x00\xff')))
        if edit == "delete":
            del text[pos : pos + 1]
        elif edit == "insert":
            text[pos:pos] = bytes([byte])
        else:
            text[pos : pos + 1] = bytes([byte])
    assume(small_grids(bytes(text)))
    expected = outcome(lambda: json_read._read_per_key(bytes(text), target=None, where=WHERE))
    assert outcome(lambda: group_from_json(bytes(text), target=None, where=WHERE)) == expected
    try:
        fast = outcome(lambda: fast_group_from_json(bytes(text), target=None, where=WHERE))
    except Unhandled:
        return
    assert fast == expected


def outcome(build: Callable[[], RefGroup]) -> RefGroup | str:
    """The group, or the error (any exception: the model's own bugs must agree too)."""
    try:
        return build()
    except Unhandled:
        raise
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def small_grids(data: bytes) -> bool:
    """False when an edit made some array's chunk grid huge (slow to allocate, not to parse)."""
    try:
        refs = json.loads(data)
        metas = [
            json.loads(v) if isinstance(v, str) else v for k, v in refs.items() if ".zarray" in k
        ]
        return all(
            math.prod(-(-s // c) for s, c in zip(m["shape"], m["chunks"], strict=False)) < 10**5
            for m in metas
        )
    except Exception:
        return True


# -- layouts and shapes of regular entries -----------------------------------------------------


def grid_refs(n0: int, n1: int, urls: int = 7) -> dict[str, Any]:
    """One 2-d array with every chunk referenced, offsets up to 2**63 - 1."""
    meta = json.dumps(zarray([n0, n1 * 2], [1, 2], dtype="<i2", fill_value=0))
    refs: dict[str, Any] = {".zgroup": '{"zarr_format":2}', "x/.zarray": meta}
    rng = np.random.default_rng(n0 * n1)
    for i in range(n0):
        for j in range(n1):
            offset = int(rng.integers(0, MAX, endpoint=True)) >> int(rng.integers(0, 63))
            url = f"s3://bucket/data/file_{(i * n1 + j) % urls:04d}.nc"
            refs[f"x/{i}.{j}"] = [url, offset, int(rng.integers(0, 10**6))]
    return refs


@pytest.mark.parametrize("layout", sorted(SERIALISERS))
def test_layouts_of_a_grid(layout: str) -> None:
    refs = grid_refs(23, 17)
    group = assert_same(refs, SERIALISERS[layout](refs))
    assert isinstance(group, RefGroup)
    assert pickle.loads(pickle.dumps(group)) == group  # manifests pickle (e.g. to dask workers)


@pytest.mark.parametrize("layout", sorted(SERIALISERS))
@pytest.mark.parametrize("metadata_last", [False, True])
@pytest.mark.parametrize("window", [1000, json_read.WINDOW_BYTES])
def test_regular_entries_are_decoded_column_wise(
    layout: str, metadata_last: bool, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the last reference (followed by "}", not by a key) takes the per-entry path."""
    refs = grid_refs(30, 30)
    if metadata_last:
        refs = {**{k: v for k, v in refs.items() if ".z" not in k}, **refs}
        refs.update({k: refs.pop(k) for k in (".zgroup", "x/.zarray")})
    per_entry: list[tuple[int, ...]] = []
    flat = json_read._Collector._flat
    monkeypatch.setattr(
        json_read._Collector, "_flat", lambda s, p, i: per_entry.append(i) or flat(s, p, i)
    )
    data = SERIALISERS[layout](refs)
    assert fast_group_from_json(data, target=None, where=WHERE, window_bytes=window) == oracle(refs)
    assert len(per_entry) <= 1


def test_whitespace_inside_references() -> None:
    refs = grid_refs(5, 4)
    text = json.dumps(refs).replace('["', '[ "').replace("]", " ]").replace(", ", " ,  ")
    assert_same(refs, text.encode())


def test_metadata_after_chunks_and_arrays_interleaved() -> None:
    refs = grid_refs(6, 5)
    y = {k.replace("x/", "y/"): v for k, v in refs.items() if k.startswith("x/")}
    keys = [k for k in refs if k.startswith("x/") and ".z" not in k]
    mixed: dict[str, Any] = {}
    for a, b in zip(keys, (k.replace("x/", "y/") for k in keys), strict=True):
        mixed[a], mixed[b] = refs[a], y[b]
    mixed.update({".zgroup": refs[".zgroup"], "x/.zarray": refs["x/.zarray"]})
    mixed["y/.zarray"] = y["y/.zarray"]
    assert_same(mixed, json.dumps(mixed).encode())


def test_long_chunk_indices_and_leading_zeros_in_keys() -> None:
    refs: dict[str, Any] = {"v/.zarray": json.dumps(zarray([10**6], [1]))}
    refs["big/.zarray"] = json.dumps(zarray([3, 10**6], [1, 10**3]))
    refs.update({"v/0": ["a", 1, 2], "v/007": ["a", 3, 4], "v/999999": ["b", 5, 6]})
    refs.update({"v/00000012": ["a", 7, 8], "v/0000000000013": ["a", 9, 10]})
    refs.update({"big/2.999": ["c", 0, 1], "big/0.0000000000000": ["c", 2, 3]})
    refs.update({"big/1.00000000": ["c", 4, 5], "big/000000001.1": ["c", 6, 7]})
    group = assert_same(refs, json.dumps(refs).encode())
    assert isinstance(group, RefGroup)


def test_long_keys_take_the_per_entry_path() -> None:
    deep = "g/" * 40 + "v"
    refs: dict[str, Any] = {f"{deep}/.zarray": json.dumps(zarray([20, 20, 20], [1, 1, 1]))}
    for i in range(20):
        refs[f"{deep}/{i:07d}.{i % 3:05d}.{19 - i:09d}"] = [f"u{i % 3}" * 50, i, i]
    assert_same(refs, json.dumps(refs).encode())


def test_url_hash_collisions_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    refs = grid_refs(9, 9, urls=40)
    monkeypatch.setattr(json_bytes, "_hash", lambda words, length: length.astype(np.uint64) * 0)
    assert_same(refs, json.dumps(refs).encode())
    assert_same(refs, ujson.dumps(refs).encode())


def test_interleaved_urls_and_unsorted_keys() -> None:
    refs = grid_refs(10, 10, urls=3)
    keys = sorted(k for k in refs if ".z" not in k)  # "x/1.10" sorts before "x/1.2"
    shuffled = {".zgroup": refs[".zgroup"], "x/.zarray": refs["x/.zarray"]}
    shuffled.update({k: refs[k] for k in keys})
    assert_same(shuffled, json.dumps(shuffled).encode())


# -- Version 1 ---------------------------------------------------------------------------------


SPEC_EXAMPLE = {
    "version": 1,
    "templates": {"u": "server.domain/path", "f": "{{c}}"},
    "gen": [
        {
            "key": "g/{{i}}",
            "url": "http://{{u}}_{{i}}",
            "offset": "{{(i + 1) * 1000}}",
            "length": "1000",
            "dimensions": {"i": {"stop": 5}},
        }
    ],
    "refs": {
        "g/.zarray": json.dumps(zarray([5], [1])),
        "h/.zarray": zarray([3], [1]),
        "h/0": ["http://target_url", 10000, 100],
        "h/1": ["http://{{u}}", 10000, 100],
        "h/2": ["http://{{f(c='text')}}", 10000, 100],
    },
}


@pytest.mark.parametrize("layout", sorted(SERIALISERS))
def test_spec_version1_example(layout: str) -> None:
    group = assert_same(SPEC_EXAMPLE, SERIALISERS[layout](SPEC_EXAMPLE))
    assert isinstance(group, RefGroup)
    assert group["h"].manifest[(2,)].url == "http://text"  # type: ignore[union-attr]
    assert group["g"].manifest[(4,)].offset == 5000  # type: ignore[union-attr]


def test_version1_fields_after_refs_and_gen_overriding_a_reference() -> None:
    refs = dict(SPEC_EXAMPLE)
    body = dict(refs["refs"])  # type: ignore[call-overload]
    body["g/3"] = ["http://overridden", 0, 1]
    moved = {"refs": body, "gen": refs["gen"], "templates": refs["templates"], "version": 1}
    assert_same(moved, json.dumps(moved).encode(), columnwise=False)


def test_templated_urls_of_regular_entries_render_once_per_url() -> None:
    v1 = version1(grid_refs(8, 8), "s3://bucket/")
    assert_same(v1, json.dumps(v1).encode())


# -- values held as Python objects -------------------------------------------------------------


def test_null_urls_take_the_target() -> None:
    refs = grid_refs(3, 3)
    refs["x/1.1"] = [None, 5, 6]
    assert_same(refs, json.dumps(refs).encode(), target="s3://default")
    assert_same(refs, json.dumps(refs).encode())  # no target: the per-key reader's error


def test_scalar_arrays_and_nested_groups() -> None:
    scalar = zarray([], [], fill_value=1.5)
    refs = {
        ".zgroup": {"zarr_format": 2},
        "a/b/.zgroup": {"zarr_format": 2},
        "a/b/.zattrs": {"x": {"y": [1, 2, None]}},
        "a/b/s/.zarray": scalar,
        "a/b/s/0": "base64:" + base64.b64encode(b"\0" * 8).decode(),
        "a/t/.zarray": json.dumps(scalar),
        "a/t/0": ["s3://x", 0, 8],
    }
    assert_same(refs, json.dumps(refs).encode())


def test_byte_order_mark_and_unicode_everywhere() -> None:
    refs = grid_refs(2, 3)
    refs = {k.replace("x", "ü/é"): v for k, v in refs.items()}
    refs["ü/é/1.1"] = ["s3://bücket/ñ/\u2028/😀", 1, 2]
    data = json.dumps(refs, ensure_ascii=False).encode()
    assert_same(refs, data)
    assert read(b"\xef\xbb\xbf" + data) == oracle(refs)


# -- errors -------------------------------------------------------------------------------------


def _error_case(value: Any) -> dict[str, Any]:
    refs = grid_refs(4, 4)
    refs["x/2.1"] = value
    return refs


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (["s3://u", -1, 5], r"key 'x/2\.1': the offset must lie in \[0, 9223372036854775807\]"),
        (["s3://u", "12", 5], r"key 'x/2\.1': the offset must be an integer, got '12'"),
        (["s3://u", 1.5, 5], r"key 'x/2\.1': the offset must be an integer, got 1\.5"),
        (["s3://u", 10, 2**63], r"key 'x/2\.1': the length must lie in \[0, 9223372036854775807\]"),
        (["s3://u", 10**30, 2], r"the offset must lie in"),
        (["s3://u", 1], r"key 'x/2\.1': a reference must be \[url\] or \[url, offset, length\]"),
        (["", 1, 2], r"key 'x/2\.1': the URL must be a non-empty string"),
        ([None, 1, 2], r"key 'x/2\.1': the reference has no URL"),
        (7, r"key 'x/2\.1': unsupported value type int"),
        ("base64:!!", r"key 'x/2\.1': invalid base64 data"),
    ],
)
def test_bad_references(value: Any, match: str) -> None:
    refs = _error_case(value)
    for layout in ("default", "ujson", "indent"):
        data = SERIALISERS[layout](refs)
        message = assert_same(refs, data)
        with pytest.raises(RefFormatError, match=f"^{WHERE}: .*{match}"):
            group_from_json(data, target=None, where=WHERE)
        assert isinstance(message, str)


def test_chunk_outside_the_grid() -> None:
    refs = grid_refs(4, 4)
    refs["x/4.0"] = ["s3://u", 1, 2]
    data = json.dumps(refs).encode()
    with pytest.raises(RefFormatError, match=r"key 'x': chunk 4\.0 lies outside the chunk grid"):
        group_from_json(data, target=None, where=WHERE)
    assert_same(refs, data, columnwise=False)


def test_chunk_given_twice_under_two_spellings() -> None:
    refs = grid_refs(4, 4)
    refs["x/01.1"] = ["s3://u", 1, 2]
    data = json.dumps(refs).encode()
    with pytest.raises(RefFormatError, match=r"chunk 1\.1 is given more than once"):
        group_from_json(data, target=None, where=WHERE)
    assert_same(refs, data, columnwise=False)


@pytest.mark.parametrize("key", ["x/1.1", "x/.zarray", ".zgroup"])
def test_a_key_given_twice_is_an_error(key: str) -> None:
    refs = grid_refs(3, 3)
    text = json.dumps(refs)
    data = (text[:-1] + f", {json.dumps(key)}: {json.dumps(refs[key])}}}").encode()
    with pytest.raises(RefFormatError, match=f"{WHERE}: key '{key}' appears more than once"):
        group_from_json(data, target=None, where=WHERE)
    with pytest.raises(RefFormatError, match="appears more than once"):
        load_json(b'{"a": {"b": 1, "b": 2}}', where=WHERE)


def test_unknown_template_and_version_2() -> None:
    v1 = version1(grid_refs(3, 3), "s3://bucket/")
    v1["refs"]["x/1.1"] = ["{{nope}}/f", 1, 2]
    data = json.dumps(v1).encode()
    with pytest.raises(RefFormatError, match=rf"^{WHERE}: key 'x/1\.1': undefined name 'nope'"):
        group_from_json(data, target=None, where=WHERE)
    assert_same(v1, data)
    v2 = {**version1(grid_refs(2, 2), "s3://"), "version": 2}
    with pytest.raises(RefFormatError, match=rf"^{WHERE}: unsupported reference set version 2"):
        group_from_json(json.dumps(v2).encode(), target=None, where=WHERE)
    assert_same(v2, json.dumps(v2).encode())


@pytest.mark.parametrize("cut", [1, 2, 30, -40, -2, -1])
def test_truncated_json(cut: int) -> None:
    data = json.dumps(grid_refs(5, 5)).encode()
    with pytest.raises(RefFormatError, match=rf"^{WHERE}: not valid JSON"):
        group_from_json(data[:cut], target=None, where=WHERE)


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b"null", b"{} {}", b'{"a": 1,}', b"\xff{}", b'{"x/0": ["a", 01, 2]}'],
)
def test_not_a_reference_set(data: bytes) -> None:
    with pytest.raises(RefFormatError, match=rf"^{WHERE}: "):
        group_from_json(data, target=None, where=WHERE)


def test_unparsable_dtype_is_a_format_error() -> None:
    """numpy raises SyntaxError on some dtype strings; both readers report a RefFormatError."""
    refs = {"x/.zarray": json.dumps(zarray([2], [1], dtype="08")), "x/0": ["s3://u", 1, 2]}
    message = assert_same(refs, json.dumps(refs).encode())
    assert "invalid Zarr v2 array metadata" in str(message)


def test_key_that_is_no_chunk_of_any_array() -> None:
    refs = grid_refs(3, 3)
    refs["x/1.1.1"] = ["s3://u", 1, 2]
    message = assert_same(refs, json.dumps(refs).encode())
    assert "not Zarr metadata and not a chunk key of any array" in str(message)


# -- primitives --------------------------------------------------------------------------------


def test_numpy_shifts_of_64_bits_or_more_give_zero() -> None:
    """The SWAR code relies on it (numpy defines it; C leaves it undefined)."""
    one = np.ones(3, np.uint64)
    by = np.array([64, 65, 200], np.uint64)
    assert not (one << by).any()
    assert not (one >> by).any()


@settings(max_examples=200, deadline=None)
@given(st.text("0123456789", min_size=1, max_size=24), st.text(" ,x", max_size=9))
@example("9223372036854775807", ",")
@example("0", "")
@example("01", " ")
def test_numbers_parse_like_json(digits: str, before: str) -> None:
    data = (before + digits + "]").encode()
    doc = Bytes(data)
    end = np.array([len(data) - 1], np.int64)
    value, count, ok = json_bytes.trail_number(doc, end)
    valid = len(digits) <= 19 and (digits == "0" or not digits.startswith("0"))
    tail = len(digits) if len(digits) <= 24 else 24
    assert bool(ok[0]) == (valid and count[0] == tail)
    if ok[0]:
        assert int(value[0]) == int(digits)
    value, ok = json_bytes.parse_number(doc, end, np.array([len(digits)]))
    assert bool(ok[0]) == valid
    if valid:
        assert int(value[0]) == int(digits)


@pytest.mark.parametrize("layout", sorted(SERIALISERS))
def test_a_root_record_full_of_escaped_quotes(layout: str) -> None:
    """A record of sources in the root ``.zattrs`` text: thousands of escaped quotes, some
    after runs of backslashes (told apart by bisection), read as the per-key reader reads it,
    the record too (group equality leaves it out)."""
    names = [f'/d\\"ir\\\\{k}".nc' for k in range(300)]
    scans = [{"url": n, "format": "hdf5", "options": {}, "files": {n: {"size": 1}}} for n in names]
    record = {"version": 1, "scans": scans}
    refs = grid_refs(3, 2)
    refs[".zattrs"] = json.dumps({"title": 'a \\" b\\\\', "_nc_refzarr_sources": record})
    data = SERIALISERS[layout](refs)
    expected = assert_same(refs, data)
    assert isinstance(expected, RefGroup)
    for window in (48, json_read.WINDOW_BYTES):
        got = read(data, window_bytes=window)
        assert isinstance(got, RefGroup)
        assert got.sources == expected.sources == record
        assert got.attributes == {"title": 'a \\" b\\\\'}
