"""Python problem kinds load wherever they are needed: `file.py:Class`, `file.py:object`, `module:Class`,
`module:object` and entry points, each resolved here and pickled into a freshly spawned process (as the GPU
worker is started), with the kind's files in a folder outside the checkout. Broken kinds fail with one line
naming the space file and what to do."""

from __future__ import annotations

import importlib
import pickle
import sys
import textwrap
from pathlib import Path

import pytest

from autotune.errors import SpaceError
from autotune.problems import loading
from autotune.problems.registry import DEFAULT_KIND, installed, resolve
from autotune.space.spec import Space, load_space
from autotune.testing.kinds import roundtrip

KIND_SOURCE = textwrap.dedent("""\
    from dataclasses import dataclass

    from autotune.problems.base import ProblemKind


    @dataclass(frozen=True)
    class Factor:
        value: int


    class Scale(ProblemKind):
        name = "scale_py"
        size_names = ("n",)

        def __init__(self, factor: int = 2) -> None:
            self.factor = Factor(factor)

        def bytes_moved(self, point, scalars):
            return self.factor.value * point.n * point.elem_bytes

        def allocate(self, point, convention, scalars, l2_bytes, seed):
            raise NotImplementedError


    class Sized(Scale):
        name = "sized_py"

        def __init__(self, factor: int, extra: int) -> None:
            super().__init__(factor + extra)


    BUILT = Sized(3, 2)  # an already built kind: bytes_moved = 5 n elem_bytes
    """)


def _space(folder: Path) -> Path:
    space = folder / "space.yaml"
    space.write_text("name: s\nproblem: gemm\n")
    return space


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """The user's folder, outside the checkout."""
    folder = tmp_path / "user"
    folder.mkdir()
    assert not str(folder).startswith(str(Path(__file__).resolve().parents[1]))
    return folder


def test_every_form_pickles_into_a_spawned_process(outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (outside / "kinds_file.py").write_text(KIND_SOURCE)
    modules = outside / "importable"
    modules.mkdir()
    (modules / "kinds_module.py").write_text(KIND_SOURCE)
    monkeypatch.syspath_prepend(str(modules))
    space = _space(outside)
    forms = {"kinds_file.py:Scale": 2, "kinds_file.py:BUILT": 5, "kinds_module:Scale": 2, "kinds_module:BUILT": 5}
    kinds = {spec: resolve(spec, space, 2) for spec in forms}
    assert type(kinds["kinds_file.py:Scale"]).__module__.startswith("_autotune_file_kinds_file_")
    there = roundtrip([(k, "fp32", "", {"n": 10}) for k in kinds.values()])
    for (spec, factor), kind, got in zip(forms.items(), kinds.values(), there, strict=True):
        p = kind.point("fp32", "", {"n": 10})
        assert got["point"] == p and got["bytes_moved"] == factor * 10 * 4 == kind.bytes_moved(p, {}), spec
        assert got["describe"] == kind.describe(), spec
    assert kinds["kinds_file.py:Scale"].describe()["class"] == "kinds_file.py:Scale"  # not the per-path module name
    assert kinds["kinds_module:BUILT"].describe()["class"] == "kinds_module:Sized"


def test_a_file_kind_unpickles_where_its_file_was_never_imported(outside: Path) -> None:
    (outside / "fresh.py").write_text(KIND_SOURCE)
    kind = resolve("fresh.py:BUILT", _space(outside), 2)
    blob = pickle.dumps(kind)
    name = type(kind).__module__
    del sys.modules[name]  # as in a process that never loaded the file
    again = pickle.loads(blob)
    assert name in sys.modules and type(again).__name__ == "Sized" and again.factor.value == 5


def test_an_entry_point_loads_in_a_spawned_process(outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = outside / "site-packages"
    (site / "plugkinds").mkdir(parents=True)
    (site / "plugkinds" / "__init__.py").write_text(KIND_SOURCE)
    info = site / "plugkinds-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugkinds\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[autotune.problems]\nplugscale = plugkinds:Scale\nplugbuilt = plugkinds:BUILT\n"
    )
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    assert {"plugscale", "plugbuilt"} <= set(installed())
    space = _space(outside)
    here = [resolve(name, space, 2) for name in ("plugscale", "plugbuilt")]
    # the kinds resolved here travel pickled; the child also resolves the entry points itself, from its sys.path
    probes = [(k, "fp32", "", {"n": 3}) for k in here] + [
        ((n, str(space)), "fp32", "", {"n": 3}) for n in ("plugscale", "plugbuilt")
    ]
    got = roundtrip(probes)
    assert [g["bytes_moved"] for g in got] == [2 * 3 * 4, 5 * 3 * 4] * 2
    assert got[0]["describe"] == got[2]["describe"] == here[0].describe()


def test_a_space_file_names_a_built_kind(outside: Path) -> None:
    (outside / "mykinds.py").write_text(KIND_SOURCE)
    space = outside / "space.yaml"
    space.write_text("name: s\nproblem: mykinds.py:BUILT\nparameters:\n  bs: [32]\n")
    loaded = load_space(space)
    assert loaded.kind.name == "sized_py" and loaded.kind.bytes_moved(loaded.kind.point("fp32", "", {"n": 1}), {}) == 20


def test_the_default_kind_comes_from_the_registry(outside: Path) -> None:
    space = outside / "space.yaml"
    space.write_text("name: s\nparameters:\n  bs: [32]\n")
    assert load_space(space).kind is DEFAULT_KIND
    assert Space.__dataclass_fields__["kind"].default is DEFAULT_KIND


@pytest.mark.parametrize(
    "source, spec, message, hint",
    [
        (
            KIND_SOURCE,
            "k.py:Sized",
            "problem kind 'k.py:Sized': Sized(...) needs arguments factor, extra",
            "give `module:object`",
        ),
        (
            "x = 1\nraise ValueError('no GPU library')\n",
            "k.py:Scale",
            "problem kind 'k.py:Scale': importing k.py raised ValueError: no GPU library (line 2)",
            "fix k.py",
        ),
        (
            "import not_a_module_anywhere\n",
            "k.py:Scale",
            "importing k.py raised ModuleNotFoundError: No module named 'not_a_module_anywhere' (line 1)",
            "fix k.py",
        ),
        ("def f(:\n", "k.py:Scale", "importing k.py raised SyntaxError", "fix k.py"),
        (
            "from autotune.problems.base import ProblemKind\nclass Half(ProblemKind):\n    name = 'half'\n"
            "    size_names = ('n',)\n",
            "k.py:Half",
            "problem kind 'k.py:Half': Half does not implement allocate, bytes_moved",
            "define these methods",
        ),
        (
            KIND_SOURCE.replace("self.factor = Factor(factor)", "raise RuntimeError('no device')").split("BUILT")[0],
            "k.py:Scale",
            "problem kind 'k.py:Scale': Scale() raised RuntimeError: no device",
            "fix Scale.__init__",
        ),
        (
            "class Plain:\n    pass\n",
            "k.py:Plain",
            "class Plain is not an autotune.problems.base.ProblemKind",
            "subclass of ProblemKind",
        ),
        ("x = 3\n", "k.py:x", "int object is not an autotune.problems.base.ProblemKind", "subclass of ProblemKind"),
        ("x = 3\n", "k.py:Nope", "k.py defines no 'Nope'", "name a class"),
        ("x = 3\n", "missing.py:Nope", "no file", "relative to the space file"),
        ("x = 3\n", "k:Nope", "cannot import 'k'", "write problem: k.py:Nope"),
    ],
)
def test_broken_kinds_fail_in_one_line(outside: Path, source: str, spec: str, message: str, hint: str) -> None:
    (outside / "k.py").write_text(source)
    with pytest.raises(SpaceError) as err:
        resolve(spec, _space(outside), 2)
    e = err.value
    assert message in e.message and "\n" not in e.message, e.message
    assert e.file == str(outside / "space.yaml") and e.line == 2 and hint in (e.hint or ""), str(e)


def test_an_entry_point_whose_package_fails(outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = outside / "site"
    (site / "badkinds").mkdir(parents=True)
    (site / "badkinds" / "__init__.py").write_text("import not_installed_dependency\n")
    info = site / "badkinds-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: badkinds\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[autotune.problems]\nbadkind = badkinds:Kind\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    with pytest.raises(SpaceError) as err:
        resolve("badkind", _space(outside), 2)
    e = err.value
    assert (
        "problem kind 'badkind': the entry point badkinds:Kind (group autotune.problems) failed to load: "
        "ModuleNotFoundError: No module named 'not_installed_dependency'"
        in e.message
        and "\n" not in e.message
    )
    assert e.file == str(outside / "space.yaml") and "reinstall or fix" in (e.hint or "")


def test_file_module_names_are_stable_and_distinct(tmp_path: Path) -> None:
    a, b = tmp_path / "one" / "k.py", tmp_path / "two" / "k.py"
    assert loading.module_name(a) == loading.module_name(a) != loading.module_name(b)
    assert loading.module_name(a).startswith("_autotune_file_k_") and loading.module_name(a).isidentifier()
