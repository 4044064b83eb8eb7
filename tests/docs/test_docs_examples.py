"""The documentation names only what exists: every refzarr name, import, keyword argument and
command-line option that README.md and docs/ show is checked against the package.

The examples are not run (they name files and buckets users have); what goes stale when the
code moves on (a renamed function or option, a removed flag) fails here instead.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import pkgutil
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import refzarr
from refzarr.cli import _parser
from refzarr.scan.base import ScanOptions

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
INLINE_COMMAND = re.compile(r"`(refzarr [^`]+)`")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
BARE_STAR = re.compile(r"(?<![\w)\]*])\*\s*,")
"""A signature's bare ``*`` (keyword-only marker), dropped so that signature blocks parse."""

SCAN_FUNCTIONS = {"scan", "scan_many"}
"""Functions whose ``**options`` are the scanners' options."""


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int
    language: str
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks() -> Iterator[Block]:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            yield Block(page, line, match.group(1), match.group(2))


PYTHON_BLOCKS = [block for block in blocks() if block.language == "python"]


def scan_option_names() -> set[str]:
    names = {field.name for field in dataclasses.fields(ScanOptions)}
    names.add("format")
    for scan_format in refzarr.scan_formats():
        names.update(scan_format.options)
    return names


def resolve(dotted: str) -> Any:
    """The object ``dotted`` (``module:attr.attr``) names, submodules imported as Python would
    find them (`pkgutil.resolve_name`); `LookupError` when nothing has that name."""
    try:
        return pkgutil.resolve_name(readable(dotted))
    except (ImportError, AttributeError) as exc:
        raise LookupError(f"{readable(dotted)}: {exc}") from exc


def readable(dotted: str) -> str:
    return dotted.replace(":", ".")


class Names(ast.NodeVisitor):
    """Collects the refzarr names a block uses and the keywords of its calls to them."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        """Names bound by imports: ``"refzarr"`` or ``"module:name"``."""
        self.used: list[tuple[int, str]] = []
        self.calls: list[tuple[int, str, list[str]]] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "refzarr":
                self.aliases[(alias.asname or alias.name).split(".")[0]] = "refzarr"
                self.used.append((node.lineno, alias.name))  # a module: no colon

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module.split(".")[0] != "refzarr":
            return
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}:{alias.name}"
            self.used.append((node.lineno, f"{module}:{alias.name}"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        dotted = self.dotted(node)
        if dotted is not None:
            self.used.append((node.lineno, dotted))
            return  # its inner attributes are prefixes of this one
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        dotted = self.dotted(node.func)
        if dotted is not None:
            keywords = [keyword.arg for keyword in node.keywords if keyword.arg is not None]
            self.calls.append((node.lineno, dotted, keywords))
        self.generic_visit(node)

    def dotted(self, node: ast.expr) -> str | None:
        """``module:attr.attr`` for an attribute chain (or imported name) rooted in refzarr."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        base = self.aliases[node.id]
        separator = "." if ":" in base else ":"
        return separator.join([base, ".".join(reversed(parts))]) if parts else base


def parsed(block: Block) -> ast.Module:
    try:
        return ast.parse(BARE_STAR.sub("", block.text))
    except SyntaxError as exc:
        pytest.fail(f"{block}: the example is not Python: {exc}")


def unknown_keywords(function: Callable[..., Any], keywords: list[str], name: str) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return []
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if takes_any and readable(name).rsplit(".", 1)[-1] in SCAN_FUNCTIONS:
        allowed = set(parameters) | scan_option_names()
        return [keyword for keyword in keywords if keyword not in allowed]
    if takes_any:
        return []
    return [keyword for keyword in keywords if keyword not in parameters]


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=str)
def test_python_examples_name_what_exists(block: Block) -> None:
    names = Names()
    names.visit(parsed(block))
    problems = []
    for line, dotted in names.used:
        try:
            resolve(dotted)
        except LookupError as exc:
            problems.append(f"line {block.line + line}: {exc}")
    for line, dotted, keywords in names.calls:
        try:
            function = resolve(dotted)
        except LookupError:
            continue  # reported above
        problems.extend(
            f"line {block.line + line}: {readable(dotted)}() takes no {keyword}="
            for keyword in unknown_keywords(function, keywords, dotted)
        )
    assert not problems, f"{block.page.relative_to(ROOT)}: " + "; ".join(problems)


def test_top_level_names_in_examples_are_public() -> None:
    """``refzarr.X`` in an example is public API (listed in ``refzarr.__all__``)."""
    private = set()
    for block in PYTHON_BLOCKS:
        names = Names()
        names.visit(parsed(block))
        for _, dotted in names.used:
            parts = readable(dotted).split(".")
            if len(parts) < 2:
                continue
            top = parts[1]
            if top not in refzarr.__all__ and not _is_module(f"refzarr.{top}"):
                private.add(f"{block}: refzarr.{top}")
    assert not private, sorted(private)


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        return False
    return True


def command_lines() -> Iterator[tuple[str, str]]:
    """``(where, command line)`` of every refzarr command the pages show."""
    for block in blocks():
        if block.language == "python":
            continue
        for offset, line in enumerate(block.text.splitlines()):
            command = line.strip().removeprefix("$ ")
            if command.startswith("refzarr "):
                yield f"{block}+{offset + 1}", command
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in INLINE_COMMAND.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            yield f"{page.relative_to(ROOT)}:{line}", match.group(1)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the CLI has no subcommands")


def command_options(command: str) -> tuple[str | None, list[str]]:
    """The subcommand a documented command line runs and the options it passes."""
    command = command.split(" # ")[0].split("|")[0].split(">")[0]
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    subcommand = words[1] if len(words) > 1 and re.fullmatch("[a-z]+", words[1]) else None
    options = [found for word in words[2:] for found in OPTION.findall(word.split("=")[0])]
    return subcommand, options


COMMANDS = list(command_lines())


def test_the_pages_show_commands() -> None:
    assert len(COMMANDS) > 20


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[where for where, _ in COMMANDS])
def test_documented_commands_exist(where: str, command: str) -> None:
    parsers = subcommands()
    subcommand, options = command_options(command)
    if subcommand is None:
        return  # `refzarr --version` and the like
    assert subcommand in parsers, f"{where}: `{command}`: no command {subcommand!r}"
    known = set(parsers[subcommand]._option_string_actions)
    unknown = [option for option in options if option not in known]
    assert not unknown, f"{where}: `{command}`: refzarr {subcommand} has no {unknown}"
