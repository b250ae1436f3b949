"""One option vocabulary over every command of the Typer app (autotune/cli/aliases.py, docs/cli.md): the same
thing has the same option name everywhere, old names are hidden aliases that still work, and the generated CLI
reference lists every visible option."""

from __future__ import annotations

import enum
import typing
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from autotune.cli.main import app
from autotune.cli.reference import commands, markdown

# option name -> its required short form (None: no short form allowed, so that a short letter means one thing)
SHORT = {"--out": "-o", "--device": "-d", "--precision": "-p", "--format": "-f", "--quiet": "-q"}
# names that must not appear: the same thing has another name (old names may exist only as hidden aliases)
FORBIDDEN = {"--database": "--db", "--output": "--out", "--dir": "--out", "--gpu": "--device", "--file": "--out"}
HIDDEN_ALIASES = {
    ("sweep", "--database"),
    ("validate", "--database"),
    ("space export", "--output"),
    ("workload config", "--points"),
}


def _options():
    for words, command in commands():
        for param in command.params:
            if param.param_type_name == "option":
                yield " ".join(words[1:]), param


def test_the_walk_reaches_every_command() -> None:
    names = {" ".join(w[1:]) for w, _ in commands()}
    assert {"sweep", "query", "validate", "import kerneltuner", "export kerneltuner", "space export"} <= names
    assert len(names) > 20


def test_one_name_for_one_thing() -> None:
    problems = []
    hidden = set()
    for where, param in _options():
        names = [*param.opts, *param.secondary_opts]
        if param.hidden:
            hidden.update((where, n) for n in names)
            continue
        for name in names:
            if name in FORBIDDEN:
                problems.append(f"autotune {where}: {name} (say {FORBIDDEN[name]})")
            if name in SHORT and SHORT[name] not in names:
                problems.append(f"autotune {where}: {name} without {SHORT[name]}")
    assert not problems, "\n".join(problems)
    assert hidden == HIDDEN_ALIASES


def test_a_short_letter_means_one_option() -> None:
    meaning = defaultdict(set)
    for _where, param in _options():
        longs = [n for n in param.opts if n.startswith("--")]
        for short in (n for n in param.opts if len(n) == 2):
            meaning[short].add(longs[0])
    assert {k: v for k, v in meaning.items() if len(v) > 1} == {}


def _value_kind(param) -> str:
    """What an option takes: a flag, a number, a choice or text (a path or a string; a list of them, repeated)."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is None:  # a Typer that keeps the click type instead
        return {"boolean": "flag", "integer": "number", "float": "number", "choice": "choice"}.get(
            getattr(getattr(param, "type", None), "name", ""), "text"
        )
    for arg in typing.get_args(annotation) or (annotation,):  # Optional[X] / list[X] -> X
        if arg is not type(None):
            annotation = arg
            break
    if isinstance(annotation, type) and issubclass(annotation, bool):
        return "flag"
    if isinstance(annotation, type) and issubclass(annotation, (int, float)):
        return "number"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "choice"
    return "text"


def test_one_name_takes_one_kind_of_value() -> None:
    """The same option name takes the same kind of value in every command (`--points` was a count in `workload
    config` and a file of problems in `validate`)."""
    kinds: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for where, param in _options():
        if not param.hidden:
            for name in param.opts:
                kinds[name][_value_kind(param)].append(where)
    assert _value_kind(next(p for w, p in _options() if w == "validate" and "--points" in p.opts)) == "text"
    assert {n: dict(k) for n, k in kinds.items() if len(k) > 1} == {}


def test_every_database_option_is_db() -> None:
    """A database that is not the main argument is --db or --NAME-db, in every command."""
    for where, param in _options():
        if param.hidden:
            continue
        text = (param.help or "").lower()
        for name in param.opts:
            if "database" in name or name.endswith("-db"):
                assert name == "--db" or name.endswith("-db"), (where, name)
        if param.name in ("db", "database"):
            assert param.opts[0] in ("--db", "--validation-db"), (where, param.opts, text)


@pytest.mark.parametrize("old, new", [("--database", "--db")])
def test_the_old_name_still_works_and_warns(tmp_path, old: str, new: str) -> None:
    """`sweep --database` is read as --db (replayed, no GPU) and says it is the old name; both at once, different,
    is refused."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "name: c\nspaces: [gemm_batched_simt]\npoints: {precisions: [fp32], sizes: {square: 4}, "
        "batch: 100}\nmax_instances: 2\nstrategy: random\n"
    )
    db = tmp_path / "x.sqlite"
    runner = CliRunner()
    both = runner.invoke(
        app,
        [
            "sweep",
            str(cfg),
            new,
            str(db),
            old,
            str(tmp_path / "y.sqlite"),
            "--quiet",
            "--replay",
            str(root / "results/default/default.sqlite.xz"),
        ],
    )
    assert both.exit_code == 2 and "old name" in both.output
    r = runner.invoke(
        app,
        [
            "space",
            "export",
            "gemm_batched_simt",
            "--where",
            "DIM_X == 4 and DIM_Y == 4",
            "--output",
            str(tmp_path / "i.csv"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "i.csv").read_text().startswith("id,")


def test_workload_config_points_is_the_old_name_of_tuned_points(tmp_path) -> None:
    """`workload config --points N` still works, warns that it is now --tuned-points, and both at once (different)
    are refused."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    args = ["workload", "config", str(root / "configs/workloads/small_h100.yaml"), "--space", "gemm_tiny_simt"]
    runner = CliRunner()
    old = runner.invoke(app, [*args, "--points", "2", "--out", str(tmp_path / "old" / "c.yaml")])
    assert old.exit_code == 0, old.output
    assert "--points is now --tuned-points" in old.output
    new = runner.invoke(app, [*args, "--tuned-points", "2", "--out", str(tmp_path / "new" / "c.yaml")])
    assert new.exit_code == 0, new.output
    body = [(tmp_path / f / "c.yaml").read_text().split("\n", 3)[3] for f in ("old", "new")]  # after the header
    assert body[0] == body[1] and "4 tuned points" in (tmp_path / "new" / "c.yaml").read_text()
    both = runner.invoke(app, [*args, "--tuned-points", "2", "--points", "3", "--out", str(tmp_path / "b.yaml")])
    assert both.exit_code == 2 and "old name" in both.output


def test_the_reference_lists_every_visible_option() -> None:
    text = markdown()
    for where, param in _options():
        if not param.hidden:
            assert f"`{param.opts[0]}`" in text, (where, param.opts)
        else:
            assert f"`{param.opts[0]}`" not in text.split(f"## `autotune {where}`")[1].split("\n## ")[0]
