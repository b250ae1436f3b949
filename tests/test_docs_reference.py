"""The reference pages name every key the loaders accept: each key of a space file (docs/space-files.md), of its
`problem:` section, arguments and constants (docs/kinds.md), and of a sweep config (docs/sweep-configs.md). The
key sets are read from the loaders themselves (the literal sets they check keys against), so a new key without
documentation fails here."""

from __future__ import annotations

import ast
import re

from autotune.paths import ROOT
from autotune.sweep import config, config_points

DOCS = ROOT / "docs"


def _literal_sets(path: str) -> list[set[str]]:
    """Every set literal of string constants with at least three members in the module (the key sets)."""
    tree = ast.parse((ROOT / path).read_text())
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Set)
            and len(node.elts) >= 3
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
        ):
            found.append({e.value for e in node.elts})
    return found


def _documented(page: str) -> set[str]:
    text = (DOCS / page).read_text()
    in_code = set(re.findall(r"`([A-Za-z_][\w]*)(?::[^`]*)?`", text))  # `key` or `key: value`
    in_yaml = set(re.findall(r"(?:^|[{,]|\s)([a-z_]+):", text, flags=re.M))  # key: in examples and mappings
    return in_code | in_yaml


def _missing(keys: set[str], pages: list[str]) -> set[str]:
    documented = set().union(*(_documented(p) for p in pages))
    return keys - documented


def test_every_space_file_key_is_documented() -> None:
    keys = set().union(*_literal_sets("autotune/space/spec.py"), *_literal_sets("autotune/space/kernel_section.py"))
    assert {"parameters", "derived", "hard", "soft", "template_args", "compiler_options"} <= keys
    assert not _missing(keys, ["space-files.md", "own-kernel.md", "kinds.md"])


def test_every_problem_key_and_init_form_is_documented() -> None:
    keys = set().union(*_literal_sets("autotune/problems/declared_file.py"))
    assert {"arguments", "tolerance", "constants", "buffer", "scalar", "init", "output"} <= keys
    assert not _missing(keys, ["kinds.md"])
    from autotune.problems.declared import INITS

    text = (DOCS / "kinds.md").read_text()
    for form in INITS:
        assert f"`init: {form}`" in text or f"`{form}`" in text, form
    for form in (
        "init: {function: gen.py:make}",
        "init: {file: data.npy}",
        "init: {file: data.npz, key: NAME}",
        'init: "i % 7"',
    ):
        assert form in text, form


def test_every_sweep_config_key_is_documented() -> None:
    keys = set(config.TOP_KEYS) | set(config.SPACE_KEYS) | set(config_points.POINT_KEYS) | set(config.STRATEGY_KEYS)
    assert not _missing(keys, ["sweep-configs.md", "sweeps.md"])
