"""Version 1 expansion: the spec's example, what fsspec users write, and what must never run."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refzarr
from refzarr import RefFormatError
from refzarr.model.templates import render

# The Version 1 example of the reference specification, and the Version 0 set it expands to.
SPEC_V1: dict[str, Any] = {
    "version": 1,
    "templates": {"u": "server.domain/path", "f": "{{c}}"},
    "gen": [
        {
            "key": "gen_key{{i}}",
            "url": "http://{{u}}_{{i}}",
            "offset": "{{(i + 1) * 1000}}",
            "length": "1000",
            "dimensions": {"i": {"stop": 5}},
        }
    ],
    "refs": {
        "key0": "data",
        "key1": ["http://target_url", 10000, 100],
        "key2": ["http://{{u}}", 10000, 100],
        "key3": ["http://{{f(c='text')}}", 10000, 100],
    },
}
SPEC_V0: dict[str, Any] = {
    "key0": "data",
    "key1": ["http://target_url", 10000, 100],
    "key2": ["http://server.domain/path", 10000, 100],
    "key3": ["http://text", 10000, 100],
    "gen_key0": ["http://server.domain/path_0", 1000, 1000],
    "gen_key1": ["http://server.domain/path_1", 2000, 1000],
    "gen_key2": ["http://server.domain/path_2", 3000, 1000],
    "gen_key3": ["http://server.domain/path_3", 4000, 1000],
    "gen_key4": ["http://server.domain/path_4", 5000, 1000],
}


def _v1(refs: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {"version": 1, "templates": {"u": "s3://bucket/dir"}, "refs": refs or {}, **fields}


def _gen(**item: Any) -> dict[str, Any]:
    base = {"key": "k{{i}}", "url": "{{u}}/f{{i}}.nc", "dimensions": {"i": {"stop": 2}}}
    return _v1(gen=[{**base, **item}])


# -- the specification's example ----------------------------------------------------------------


def test_spec_version_1_example_expands_to_the_spec_version_0_result() -> None:
    assert refzarr.expand_references(SPEC_V1) == SPEC_V0


def test_spec_example_key_order_refs_then_gen() -> None:
    assert list(refzarr.expand_references(SPEC_V1)) == list(SPEC_V0)


def test_empty_version_1_set() -> None:
    assert refzarr.expand_references({"version": 1}) == {}


# -- what fsspec and kerchunk users write -------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("{{u}}/a.nc", "s3://bucket/dir/a.nc"),
        ("{{ u }}/a.nc", "s3://bucket/dir/a.nc"),
        ("{{u}}/{{u}}", "s3://bucket/dir/s3://bucket/dir"),
        ("{{f(c='x.nc')}}", "s3://bucket/dir/x.nc"),
        ('{{ f(c="x.nc") }}', "s3://bucket/dir/x.nc"),
        ("{{f(c=u)}}", "s3://bucket/dir/s3://bucket/dir"),
        ("{{f(c=7)}}", "s3://bucket/dir/7"),
        ("{{g(a='p', b='q')}}", "p-q"),
        ("{{g(a='p',b=3,)}}", "p-3"),
        ("plain://no/templates", "plain://no/templates"),
        ("{{u}}/été 2024/日本.nc", "s3://bucket/dir/été 2024/日本.nc"),
    ],
)
def test_url_templates(url: str, expected: str) -> None:
    refs = _v1({"k": [url, 0, 1]})
    refs["templates"] |= {"f": "{{u}}/{{c}}", "g": "{{a}}-{{b}}"}
    refs["templates"]["f"] = "s3://bucket/dir/{{c}}"
    assert refzarr.expand_references(refs)["k"] == [expected, 0, 1]


def test_templates_apply_to_whole_file_references_too() -> None:
    assert refzarr.expand_references(_v1({"k": ["{{u}}/a.nc"]}))["k"] == ["s3://bucket/dir/a.nc"]


def test_urls_without_expressions_are_literal() -> None:
    """As with fsspec's default (simple) templates, only ``{{ }}`` triggers rendering."""
    url = "s3://b/{% raw %}/x{#y#}"
    assert refzarr.expand_references(_v1({"k": [url, 0, 1]}))["k"] == [url, 0, 1]


def test_text_values_are_never_rendered() -> None:
    assert refzarr.expand_references(_v1({"k": "{{u}} is data"}))["k"] == "{{u}} is data"


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        ("{{(i + 1) * 1000}}", [1000, 2000]),
        ("{{ i*10+3 }}", [3, 13]),
        ("{{i // 2}}", [0, 0]),
        ("{{ 7 % (i + 2) }}", [1, 1]),
        ("{{ -i + 5 }}", [5, 4]),
        ("{{ (((i))) }}", [0, 1]),
        ("{{i * 9223372036854775807}}", [0, 9223372036854775807]),
        ("42", [42, 42]),
        (42, [42, 42]),
    ],
)
def test_gen_integer_arithmetic(offset: Any, expected: list[int]) -> None:
    refs = refzarr.expand_references(_gen(offset=offset, length="{{i + 1}}"))
    assert [refs["k0"][1], refs["k1"][1]] == expected
    assert [refs["k0"][2], refs["k1"][2]] == [1, 2]


def test_gen_without_offset_and_length_makes_whole_file_references() -> None:
    assert refzarr.expand_references(_gen()) == {
        "k0": ["s3://bucket/dir/f0.nc"],
        "k1": ["s3://bucket/dir/f1.nc"],
    }


def test_gen_dimension_forms() -> None:
    refs = refzarr.expand_references(
        _v1(
            gen=[
                {
                    "key": "v/{{t}}.{{z}}",
                    "url": "{{u}}/{{t}}.nc",
                    "offset": "{{z * 100}}",
                    "length": "100",
                    "dimensions": {"t": {"start": 1, "stop": 6, "step": 2}, "z": [0, 3]},
                }
            ]
        )
    )
    # a cartesian product, the first dimension varying slowest
    assert list(refs) == ["v/1.0", "v/1.3", "v/3.0", "v/3.3", "v/5.0", "v/5.3"]
    assert refs["v/3.3"] == ["s3://bucket/dir/3.nc", 300, 100]


def test_gen_keys_come_after_refs_and_may_override_them() -> None:
    refs = refzarr.expand_references(_gen() | {"refs": {"k0": "inline", "z": "x"}})
    assert list(refs) == ["k0", "z", "k1"]
    assert refs["k0"] == ["s3://bucket/dir/f0.nc"]


def test_several_gen_items() -> None:
    refs = _gen()
    refs["gen"].append({"key": "m{{j}}", "url": "{{u}}", "dimensions": {"j": [7]}})
    assert list(refzarr.expand_references(refs)) == ["k0", "k1", "m7"]


def test_empty_dimension_generates_nothing() -> None:
    assert refzarr.expand_references(_gen(dimensions={"i": {"stop": 0}})) == {}


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**40), st.integers(-(2**40), 2**40), st.integers(1, 2**20))
def test_arithmetic_agrees_with_python(i: int, a: int, b: int) -> None:
    expression = "{{ (i + a) * 3 - i // b + i % b }}"
    assert render(expression, {}, {"i": i, "a": a, "b": b}, where="k") == str(
        (i + a) * 3 - i // b + i % b
    )


# -- what must be rejected, naming the key ------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("{{ u.__class__ }}", "unsupported template expression"),
        ("{{ u.__class__.__mro__[1].__subclasses__() }}", "unsupported template expression"),
        ("{{ u|upper }}", "unsupported template expression"),
        ("{{ u | safe }}", "unsupported template expression"),
        ("{% for x in range(3) %}{{x}}{% endfor %}", "statements and comments are not supported"),
        ("{% set x = 1 %}{{u}}", "statements and comments are not supported"),
        ("{# comment #}{{u}}", "statements and comments are not supported"),
        ("{{ 1/2 }}", "unsupported template expression"),
        ("{{ 2 ** 64 }}", "unexpected '\\*'"),
        ("{{ f(c=u.y) }}", "unsupported template expression"),
        ("{{ f(c=undefined) }}", "undefined name 'undefined'"),
        ("{{ undefined }}", "undefined name 'undefined'"),
        ("{{ self }}", "undefined name 'self'"),
        ("{{ lipsum.__globals__ }}", "unsupported template expression"),
        ("{{ cycler.__init__.__globals__.os.popen('id').read() }}", "unsupported template"),
        ("{{ range(10) }}", "unknown template 'range'"),
        ("{{ nothere(c='x') }}", "unknown template 'nothere'"),
        ("{{ f('positional') }}", "template arguments must be given as name=value"),
        ("{{ f(c=) }}", "unexpected '\\)'"),
        ("{{ f(c='x' }}", "expected \\)"),
        ("{{ u[0] }}", "unsupported template expression"),
        ("{{ 'literal' }}", "a string literal is only allowed as a template-call argument"),
        ("{{ u + 1 }}", "arithmetic '\\+' needs integers"),
        ("{{ 1 if u else 2 }}", "unexpected 'if'"),
        ("{{ (1 }}", "expected \\)"),
        ("{{ }}", "empty expression"),
        ("{{ 1 // 0 }}", "division by zero"),
        ("{{ 1 % 0 }}", "division by zero"),
        ("{{ u", "unterminated"),
        ("{{ 1.5 }}", "unsupported template expression"),
        ("{{ True }}", "undefined name 'True'"),
        ("{{ u }} {{ u = 1 }}", "unexpected '='"),
        ("{{ f(c=1)(c=2) }}", "unexpected '\\('"),
        ("{{ __import__('os') }}", "unknown template '__import__'"),
        ("{{ u; 1 }}", "unsupported template expression"),
        ("{{ {} }}", "unsupported template expression"),
    ],
)
def test_anything_beyond_names_calls_and_integer_arithmetic_is_rejected(
    url: str, message: str
) -> None:
    refs = _v1({"bad/key": [url, 0, 1]})
    refs["templates"]["f"] = "{{c}}"
    with pytest.raises(RefFormatError, match=message) as info:
        refzarr.expand_references(refs)
    assert "key 'bad/key'" in str(info.value)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"key": "k{{i|string}}"}, r"gen\[0\]\.key: unsupported template expression"),
        ({"url": "{{u}}/{{i.real}}"}, r"gen\[0\]\.url \(key 'k0'\): unsupported"),
        ({"offset": "{{i/2}}", "length": "1"}, r"gen\[0\]\.offset \(key 'k0'\): unsupported"),
        ({"offset": "{{u}}", "length": "1"}, r"key 'k0': offset and length must render to non-neg"),
        ({"offset": "{{i - 1}}", "length": "1"}, r"key 'k0': offset and length must render to non"),
        ({"offset": "1"}, r"gen\[0\]: 'offset' and 'length' must be given together"),
        ({"length": "1"}, r"gen\[0\]: 'offset' and 'length' must be given together"),
        ({"dimensions": {}}, r"gen\[0\]: needs 'dimensions' with at least one variable"),
        (
            {"dimensions": {"i": {"start": 1}}},
            r"gen\[0\]: dimension 'i' must be a list of integers",
        ),
        ({"dimensions": {"i": [1, "2"]}}, r"gen\[0\]: dimension 'i' must be a list of integers"),
        (
            {"dimensions": {"i": {"stop": 3, "step": 0}}},
            r"dimension 'i': start and step must be int",
        ),
        ({"key": None}, r"gen\[0\]: needs string 'key' and 'url'"),
        ({"url": 5}, r"gen\[0\]: needs string 'key' and 'url'"),
    ],
)
def test_malformed_gen_items_are_named(item: dict[str, Any], message: str) -> None:
    with pytest.raises(RefFormatError, match=message):
        refzarr.expand_references(_gen(**item))


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        (_v1(gen={"key": "k"}), "'gen' must be a list"),
        (_v1(gen=["item"]), r"gen\[0\]: needs string 'key' and 'url'"),
        ({"version": 1, "templates": ["u"]}, "'templates' must be an object of name -> string"),
        ({"version": 1, "templates": {"u": 1}}, "'templates' must be an object of name -> string"),
        ({"version": "1"}, "unsupported reference set version '1'"),
    ],
)
def test_malformed_version_1_sets(refs: dict[str, Any], message: str) -> None:
    with pytest.raises(RefFormatError, match=message):
        refzarr.expand_references(refs)


def test_a_template_is_rendered_once_without_recursion() -> None:
    """A template whose value references another template is not expanded further."""
    refs = _v1({"k": ["{{v}}", 0, 1]})
    refs["templates"]["v"] = "{{u}}/x"
    with pytest.raises(RefFormatError, match=r"key 'k' \(template 'v'\): undefined name 'u'"):
        refzarr.expand_references(refs)


def test_huge_arithmetic_stays_integer() -> None:
    big = "{{ 99999999999999999999 * 99999999999999999999 }}"
    assert render(big, {}, {}, where="k") == str(99999999999999999999**2)
