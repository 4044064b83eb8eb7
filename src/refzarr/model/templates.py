"""Kerchunk Version 1 expansion (``templates``, ``gen``) by a renderer that cannot run code.

Only these forms are understood inside ``{{ ... }}``:

- ``name``: a template or a ``gen`` dimension variable;
- ``name(arg='text', n=3)``: a template rendered with the given literal arguments;
- integer arithmetic (``+ - * // %``, parentheses, unary minus) on integer literals and
  ``gen`` dimension variables, e.g. ``{{(i + 1) * 1000}}``.

Anything else (filters, statements, attribute access, true division...) is a RefFormatError
that names the key; nothing is ever evaluated.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from refzarr.errors import RefFormatError

__all__ = ["MAX_GENERATED", "expand_gen", "expand_v1", "render", "set_max_generated"]

_BLOCK = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_TOKEN = re.compile(
    r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_]\w*)|(?P<str>'[^'\\]*'|\"[^\"\\]*\")|(?P<op>//|[-+*%(),=]))"
)

Scope = Mapping[str, Any]


def render(text: str, templates: Mapping[str, str], variables: Scope, *, where: str) -> str:
    """Render one jinja-str with the restricted grammar; RefFormatError names ``where``."""
    if "{%" in text or "{#" in text:
        raise RefFormatError(f"{where}: template statements and comments are not supported")
    if "{{" not in text:
        return text

    def substitute(match: re.Match[str]) -> str:
        try:
            value = _Parser(match.group(1), templates, variables, where).parse()
        except RecursionError:
            raise RefFormatError(f"{where}: template expression nested too deeply") from None
        return str(value)

    if "{{" in _BLOCK.sub("", text):
        raise RefFormatError(f"{where}: unterminated '{{{{' in {text!r}")
    return _BLOCK.sub(substitute, text)


class _Parser:
    """Recursive-descent parser/evaluator of one ``{{ ... }}`` expression."""

    def __init__(self, source: str, templates: Mapping[str, str], scope: Scope, where: str):
        self.source = source
        self.tokens = self._tokenize(source, where)
        self.pos = 0
        self.templates = templates
        self.scope = scope
        self.where = where

    def _tokenize(self, source: str, where: str) -> list[tuple[str, str]]:
        tokens, pos = [], 0
        while pos < len(source):
            if source[pos:].strip() == "":
                break
            match = _TOKEN.match(source, pos)
            if match is None:
                raise RefFormatError(
                    f"{where}: unsupported template expression {{{{{source}}}}}: only names, "
                    "template calls with literal arguments and integer arithmetic are allowed"
                )
            kind = match.lastgroup
            assert kind is not None
            tokens.append((kind, match.group(kind)))
            pos = match.end()
        return tokens

    def fail(self, why: str) -> RefFormatError:
        return RefFormatError(f"{self.where}: {why} in template expression {{{{{self.source}}}}}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise self.fail(f"expected {value or 'a value'}")
        self.pos += 1
        return token

    def parse(self) -> Any:
        if not self.tokens:
            raise self.fail("empty expression")
        value = self.sum()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return value

    def sum(self) -> Any:
        value = self.product()
        while (token := self.peek()) is not None and token[1] in "+-":
            self.pos += 1
            value = self._arith(token[1], value, self.product())
        return value

    def product(self) -> Any:
        value = self.unary()
        while (token := self.peek()) is not None and token[1] in ("*", "//", "%"):
            self.pos += 1
            value = self._arith(token[1], value, self.unary())
        return value

    def unary(self) -> Any:
        token = self.peek()
        if token is not None and token[1] == "-":
            self.pos += 1
            return self._arith("-", 0, self.unary())
        return self.atom()

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "int":
            return int(text)
        if kind == "str":
            raise self.fail("a string literal is only allowed as a template-call argument")
        if text == "(":
            value = self.sum()
            self.take(")")
            return value
        if kind != "name":
            raise self.fail(f"unexpected {text!r}")
        token = self.peek()
        if token is not None and token[1] == "(":
            return self.call(text)
        return self.lookup(text)

    def lookup(self, name: str) -> Any:
        if name in self.scope:
            return self.scope[name]
        if name in self.templates:
            return render(self.templates[name], {}, {}, where=f"{self.where} (template {name!r})")
        raise self.fail(f"undefined name {name!r}")

    def call(self, name: str) -> str:
        if name not in self.templates:
            raise self.fail(f"unknown template {name!r}")
        self.take("(")
        arguments: dict[str, Any] = {}
        while (token := self.peek()) is not None and token[1] != ")":
            kind, key = self.take()
            if kind != "name":
                raise self.fail("template arguments must be given as name=value")
            self.take("=")
            kind, text = self.take()
            if kind == "str":
                arguments[key] = text[1:-1]
            elif kind == "int":
                arguments[key] = int(text)
            elif kind == "name":
                arguments[key] = self.lookup(text)
            else:
                raise self.fail(f"unexpected {text!r}")
            if (token := self.peek()) is not None and token[1] == ",":
                self.pos += 1
        self.take(")")
        return render(
            self.templates[name], {}, arguments, where=f"{self.where} (template {name!r})"
        )

    def _arith(self, op: str, left: Any, right: Any) -> int:
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right)):
            raise self.fail(f"arithmetic {op!r} needs integers, got {left!r} and {right!r}")
        if op in ("//", "%") and right == 0:
            raise self.fail("division by zero")
        a, b = int(left), int(right)
        ops = {"+": a + b, "-": a - b, "*": a * b}
        if op in ops:
            return ops[op]
        return a // b if op == "//" else a % b


def _templates(refs: Mapping[str, Any]) -> dict[str, str]:
    templates = refs.get("templates") or {}
    if not isinstance(templates, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in templates.items()
    ):
        raise RefFormatError("'templates' must be an object of name -> string")
    return dict(templates)


MAX_GENERATED = 100_000_000
"""References one ``gen`` entry may generate at most (a few bytes of JSON can declare 10^12).
Raise it with `set_max_generated` for a trusted set that needs more."""

_limits = {"generated": MAX_GENERATED}


def set_max_generated(count: int) -> None:
    """Allow ``gen`` entries to generate up to ``count`` references each (trusted sets only).

    Raises
    ------
    ValueError
        When ``count`` is not a positive integer.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"the limit must be a positive integer, got {count!r}")
    _limits["generated"] = count


def _dimension_values(name: str, spec: Any, where: str) -> Sequence[int]:
    """The values of a ``gen`` dimension: a list, or a `range` (never expanded here)."""
    if isinstance(spec, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in spec):
        return list(spec)
    stop = spec.get("stop") if isinstance(spec, Mapping) else None
    if isinstance(stop, int) and not isinstance(stop, bool):
        start, step = spec.get("start", 0), spec.get("step", 1)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (start, step)) or not step:
            raise RefFormatError(
                f"{where}: dimension {name!r}: start and step must be integers (step not 0)"
            )
        return range(start, stop, step)
    raise RefFormatError(
        f"{where}: dimension {name!r} must be a list of integers or {{start, stop, step}}, "
        f"got {spec!r}"
    )


def _check_count(where: str, names: list[str], values: list[Sequence[int]]) -> None:
    """Raise before generating anything when ``gen`` would exceed the limit."""
    count = math.prod(len(v) for v in values)
    if count > _limits["generated"]:
        sizes = ", ".join(f"{n}: {len(v):,}" for n, v in zip(names, values, strict=True))
        raise RefFormatError(
            f"{where}: generates {count:,} references ({sizes}), more than the limit of "
            f"{_limits['generated']:,}; if the reference set is trusted, raise the limit with "
            "refzarr.model.templates.set_max_generated(...)"
        )


def expand_gen(gen: Any, templates: Mapping[str, str]) -> Iterator[tuple[str, list[Any]]]:
    """The ``(key, reference)`` pairs a Version 1 ``gen`` list generates."""
    if not isinstance(gen, list):
        raise RefFormatError("'gen' must be a list")
    for number, item in enumerate(gen):
        where = f"gen[{number}]"
        if not isinstance(item, Mapping) or not all(
            isinstance(item.get(f), str) for f in ("key", "url")
        ):
            raise RefFormatError(f"{where}: needs string 'key' and 'url'")
        if ("offset" in item) != ("length" in item):
            raise RefFormatError(f"{where}: 'offset' and 'length' must be given together")
        dims = item.get("dimensions")
        if not isinstance(dims, Mapping) or not dims:
            raise RefFormatError(f"{where}: needs 'dimensions' with at least one variable")
        names = list(dims)
        values = [_dimension_values(n, dims[n], where) for n in names]
        _check_count(where, names, values)
        for combo in itertools.product(*values):
            scope = dict(zip(names, combo, strict=True))
            key = render(item["key"], templates, scope, where=f"{where}.key")
            url = render(item["url"], templates, scope, where=f"{where}.url (key {key!r})")
            if "offset" not in item:
                yield key, [url]
                continue
            pair = [
                render(str(item[f]), templates, scope, where=f"{where}.{f} (key {key!r})")
                for f in ("offset", "length")
            ]
            if not all(p.strip().isdigit() for p in pair):
                raise RefFormatError(
                    f"{where}: key {key!r}: offset and length must render to non-negative "
                    f"integers, got {pair!r}"
                )
            yield key, [url, int(pair[0]), int(pair[1])]


def expand_v1(refs: Mapping[str, Any]) -> dict[str, Any]:
    """A Version 1 reference set expanded to its Version 0 dict (URLs rendered, gen generated)."""
    if refs.get("version") != 1:
        raise RefFormatError(
            f"unsupported reference set version {refs.get('version')!r}: expected 1 (or a "
            "Version 0 set without a 'version' key)"
        )
    unknown = set(refs) - {"version", "templates", "gen", "refs"}
    if unknown:
        raise RefFormatError(f"unknown top-level Version 1 fields: {sorted(unknown)}")
    templates = _templates(refs)
    body = refs.get("refs") or {}
    if not isinstance(body, Mapping):
        raise RefFormatError("'refs' must be an object")
    out: dict[str, Any] = {}
    for key, value in body.items():
        reference = isinstance(value, list | tuple) and value and isinstance(value[0], str)
        if reference and "{{" in value[0]:
            value = [render(value[0], templates, {}, where=f"key {key!r}"), *value[1:]]
        out[key] = value
    out.update(expand_gen(refs.get("gen") or [], templates))
    return out
