"""Common mistakes and hostile inputs on the command line: each is one `error:` line with what to do, exit code 2, no
traceback, and nothing unbounded (memory, workers, bytes).

Most cases run the command in this process (typer's CliRunner: the same command group, exit code and standard error,
without a second of Python start-up each); a few run `python -m autotune ...` as a real process (`real=True`): the
sweeps that would start workers, YAML nested 20,000 deep (a recursion in C would take the interpreter down), and one
of each kind of case, so that what only a process shows (a traceback printed outside the command, the exit code of
the interpreter) is still checked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autotune.paths import ROOT
from tests.support.harness import invoke_cli, run_cli

EXAMPLE = ROOT / "examples" / "transpose"
EXAMPLE_DB = EXAMPLE / "results" / "transpose_h100.sqlite.xz"
EXAMPLE_TABLE = EXAMPLE / "results" / "dispatch.json"


def cli(*args: str, real: bool = False, cwd: Path | str = ROOT, timeout: float = 300, **env: str):
    """The command line `autotune ARGS` from `cwd` with `env` added: in this process, or (`real`) as a process."""
    if real:
        return run_cli(*args, cwd=cwd, timeout=timeout, **env)
    return invoke_cli(*args, cwd=cwd, **env)


def one_line(r: subprocess.CompletedProcess, *words: str) -> str:
    """The `error:` line of a command that failed as a user mistake (exit 2, no traceback), checked for `words`."""
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, r.stderr[-3000:]
    for word in words:
        assert word in r.stderr, (word, r.stderr[-3000:])
    return errors[0]


# ------------------------------------------------------------------------------------------------ TOL as a percent
@pytest.mark.parametrize(
    "args",
    [
        ("report", str(EXAMPLE_DB), "--tol", "5", "-o", "{tmp}/rep"),
        ("emit", str(EXAMPLE_DB), "--tol", "5"),
        ("emit", str(EXAMPLE_DB), "--tol", "nan"),
        ("emit", str(EXAMPLE_DB), "--tol", "-0.1"),
        ("emit", str(EXAMPLE_DB), "--tol", "1"),
        ("emit", str(EXAMPLE_DB), "--structure", "cost:5"),
        ("active", str(EXAMPLE_DB), "--structure", "cost:5", "-o", "{tmp}/act"),  # before any database is read
        ("analyze", str(EXAMPLE_DB), "--tols", "0,5"),
        ("analyze", str(EXAMPLE_DB), "--tols", "0,nan"),
        ("report", str(EXAMPLE_DB), "--tols", "0,0.05,10", "-o", "{tmp}/rep"),
        ("validate", str(EXAMPLE_TABLE), "--tol", "10", "--random", "3", "-o", "{tmp}/val"),
        ("active", str(EXAMPLE_DB), "--tol", "10", "-o", "{tmp}/act"),
        ("sweep", str(ROOT / "configs" / "default.yaml"), "--roofline-tol", "5", "--replay", str(EXAMPLE_DB)),
    ],
)
def test_a_tol_given_as_a_percent_is_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    r = cli(*(a.format(tmp=tmp_path) for a in args), real=args[0] == "sweep", cwd=tmp_path)
    one_line(r, "TOL is a fraction: 0.05 = 5%")
    assert not list(tmp_path.iterdir()), "the option is checked before anything is written"


@pytest.mark.parametrize(
    "args, words",
    [
        (("emit", str(EXAMPLE_DB), "--method", "foo"), "--method foo: no such kernel-set reduction"),
        (("report", str(EXAMPLE_DB), "--method", "optimal", "-o", "{tmp}/rep"), "no such kernel-set reduction"),
        (("analyze", str(EXAMPLE_DB), "--bks", "1e999"), "--bks = '1e999' is not a whole number"),
        (("analyze", str(EXAMPLE_DB), "--bks", "10,-1"), "--bks = '-1' is not a whole number"),
        (("emit", str(EXAMPLE_DB), "--bk", "-1"), "--bk = -1 is not a whole number of at least 0"),
        (("report", str(EXAMPLE_DB), "--bk", "-3", "-o", "{tmp}/rep"), "--bk = -3 is not a whole number"),
        (("emit", str(EXAMPLE_DB), "--bk", str(10**30)), "--bk = 1000000000000000000000000000000 is not"),
    ],
)
def test_a_method_or_bk_that_is_not_one_is_one_line(tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    """--method foo was a ValueError traceback after the database was read, --bks 1e999 an OverflowError, --bk -1 a
    ValueError traceback ('BK must be >= 1') after the database was read."""
    one_line(cli(*(a.format(tmp=tmp_path) for a in args), cwd=tmp_path), words)
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------ files that are not what goes there
def _files(tmp: Path) -> dict[str, Path]:
    """Hostile inputs: random bytes, NUL bytes, YAML nested 20,000 deep (flow and block), parameter values past
    64-bit arithmetic (a range stop of 10^20, .inf), each in a space file that is otherwise fine."""
    import random

    space = (ROOT / "spaces" / "gemm_naive.yaml").read_text()
    out = {
        "binary": random.Random(0).randbytes(3000),
        "nul": b"name: x\ndescription: y\x00\n",
        "deep_flow": ("a: " + "[" * 20_000 + "]" * 20_000 + "\n").encode(),
        "deep_block": ("a:\n" + "".join("  " * i + "b:\n" for i in range(1, 3000)) + "  " * 3000 + "c: 1\n").encode(),
        "range_1e20": space.replace(
            "BLOCK_Y: [1, 2, 4, 8, 16]", "BLOCK_Y: {start: 1, stop: 100000000000000000000, step: 10000000000000}"
        ).encode(),
        "stop_1e20": space.replace(
            "BLOCK_Y: [1, 2, 4, 8, 16]", "BLOCK_Y: {start: 99999999999999999990, stop: 100000000000000000000}"
        ).encode(),
        "inf": space.replace("BLOCK_Y: [1, 2, 4, 8, 16]", "BLOCK_Y: [1, .inf]").encode(),
    }
    paths = {}
    for name, data in out.items():
        paths[name] = tmp / f"{name}.yaml"
        paths[name].write_bytes(data)
    return paths


HOSTILE_FILES = [
    ("binary", "not a text file"),
    ("nul", "NUL bytes"),
    ("deep_flow", "nests deeper than"),
    ("deep_block", "nests deeper than"),
    ("range_1e20", "is not a number from -2**62 to 2**62"),
    ("stop_1e20", "is not a number from -2**62 to 2**62"),
    ("inf", "is not a number from -2**62 to 2**62"),
]
SPACE_COMMANDS = [("space", "show", "{f}"), ("space", "diff", "{f}", "gemm_naive"), ("explore", "{f}", "-o", "x.html")]


@pytest.mark.parametrize("command", SPACE_COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("name, words", HOSTILE_FILES)
def test_a_hostile_space_file_is_one_line_with_its_line(tmp_path: Path, command: tuple, name: str, words: str) -> None:
    if command[0] == "explore":
        pytest.importorskip("plotly")
    f = _files(tmp_path)[name]
    args = ("--allow-path", str(ROOT / "kernels_src"), *(a.format(f=f) for a in command))
    r = cli(*args, real=name.startswith("deep_"), cwd=tmp_path, timeout=120)
    line = one_line(r, words)
    assert f"{f.name}:" in line, line  # the file and the line


@pytest.mark.parametrize("name", ["binary", "nul", "deep_flow", "deep_block"])
@pytest.mark.parametrize("command", [("sweep", "{f}"), ("workload", "show", "{f}")], ids=lambda c: c[0])
def test_a_hostile_config_or_workload_is_one_line(tmp_path: Path, command: tuple, name: str) -> None:
    f = _files(tmp_path)[name]
    r = cli(*(a.format(f=f) for a in command), real=name.startswith("deep_"), cwd=tmp_path, timeout=120)
    assert f"{f.name}:" in one_line(r)


def test_a_config_with_an_empty_points_list_is_one_line_at_its_line(tmp_path: Path) -> None:
    """`points: []` said 'space gemm_naive accepts none of the config's test points' (it was given none) and left
    the sweep's database behind."""
    config = tmp_path / "c.yaml"
    config.write_text("name: x\nspaces: [gemm_naive]\npoints: []\n")
    r = cli("sweep", str(config), "--replay", RECORDED, "--db", str(tmp_path / "s.sqlite"), cwd=tmp_path)
    assert "c.yaml:3: `points` is empty" in one_line(r, "list at least one entry under `points`")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["c.yaml"]


@pytest.mark.parametrize(
    "where, db, words",
    [
        ("TILE_DIM == 12345", "new/deep/s.sqlite", "c.yaml:2: space transpose_tiled: the entry keeps no instance"),
        ("TILE == 1", "s.sqlite", "c.yaml:2: transpose_tiled: where: unknown name 'TILE'"),
        ("TILE == 1", "old.sqlite", "unknown name 'TILE'"),
    ],
)
def test_a_sweep_that_fails_while_planning_leaves_no_new_database(tmp_path: Path, where: str, db: str, words) -> None:
    """A config entry whose `where:` keeps no instance said 'accepts none of the config's test points' (hint: 'it
    accepts precisions fp32 and shapes ', which the space does); that and any other planning error left the new
    database (and its new folders) behind. A database that was there stays."""
    (tmp_path / "old.sqlite").touch()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"name: x\nspaces: [{{space: {EXAMPLE / 'space.yaml'}, where: '{where}'}}]\n"
        "points: [{kind: transpose, precisions: [fp32], sizes: {rows: 4096, cols: 4096}}]\n"
    )
    r = cli("sweep", str(config), "--replay", str(EXAMPLE_DB), "--db", db, cwd=tmp_path)
    assert words in one_line(r)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["c.yaml", "old.sqlite"]


@pytest.mark.parametrize("db", ["s.sqlite", "new/deep/s.sqlite", "old.sqlite"])
def test_a_replay_that_holds_none_of_the_configs_pairs_is_one_line(tmp_path: Path, db: str) -> None:
    """A transpose config replayed from a GEMM recording said 'the recording lacks 156 of its 156 pairs', measured
    nothing and left a new, empty database marked `done`, exit 0. Now one line naming the recording, what it holds
    and what the config asks, before the sweep begins: a new database is removed, one that was there is untouched."""
    from autotune.store.store import Store

    with Store.open(f"sqlite:///{tmp_path / 'old.sqlite'}"):
        pass
    before = (tmp_path / "old.sqlite").read_bytes()
    r = cli("sweep", str(EXAMPLE / "sweep.yaml"), "--replay", RECORDED, "--db", db, cwd=tmp_path)
    line = one_line(r, "what to do:")
    assert "default.sqlite.xz: the recording holds none of the 156 (instance, test point) pairs" in line, line
    assert "2,886 pairs of kind gemm at 12 test points" in line and "kind transpose at 3 test points" in line, line
    assert sorted(f.name for f in tmp_path.iterdir()) == ["old.sqlite"]
    assert (tmp_path / "old.sqlite").read_bytes() == before


def test_a_database_where_the_sweep_config_goes_is_one_line(tmp_path: Path) -> None:
    r = cli("sweep", str(EXAMPLE_DB), real=True, cwd=tmp_path)
    line = one_line(r, "xz-compressed", "--db or --replay")
    assert f"{EXAMPLE_DB.name}:1:" in line
    plain = tmp_path / "r.sqlite"
    plain.write_bytes(b"SQLite format 3\x00" + bytes(4080))
    assert "an SQLite database" in one_line(cli("sweep", str(plain), cwd=tmp_path))


# ------------------------------------------------------------------------------ a dispatch table nested too deep
@pytest.mark.parametrize("command", [("emit", "{f}", "-f", "cpp"), ("validate", "{f}", "--random", "3", "-o", "val")])
def test_a_dispatch_table_nested_too_deep_is_one_line(tmp_path: Path, command: tuple) -> None:
    """JSON nested 100,000 deep was a RecursionError traceback from json.loads in load_table."""
    f = tmp_path / "dispatch.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    r = cli(*(a.format(f=f) for a in command), real=True, cwd=tmp_path)
    assert "dispatch.json" in one_line(r, "nested too deep")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dispatch.json"]


# --------------------------------------------------------------------------------- counts and seeds below their range
@pytest.mark.parametrize(
    "args, words",
    [
        (("space", "list", "gemm_naive", "--sample", "-1"), "'--sample'"),
        (("space", "list", "gemm_naive", "--sample", "3", "--seed", "-1"), "'--seed'"),
        (("sweep", str(ROOT / "configs" / "default.yaml"), "--seed", "-1"), "'--seed'"),
        (("sweep", str(ROOT / "configs" / "default.yaml"), "--max-instances", "-5"), "'--max-instances'"),
    ],
)
def test_a_count_or_seed_below_its_range_is_refused_before_any_work(tmp_path: Path, args: tuple, words: str) -> None:
    """space list --sample -1 and --seed -1, sweep --seed -1 were numpy ValueError tracebacks (the sweep's after its
    database was made); sweep --max-instances -5 measured all but the last 5 of the config's 300 instances, exit 0
    (a config's `max_instances: -5` and `seed: -1` were refused at their line already)."""
    db = tmp_path / "s.sqlite"
    extra = ("--replay", str(ROOT / "results" / "default" / "default.sqlite.xz"), "--db", str(db), "--quiet")
    r = cli(*args, *(extra if args[0] == "sweep" else ()), real=args[0] == "sweep", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Invalid value" in one_line(r, words)
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------- --generic that is not an instance
GEMM_DB = str(ROOT / "results" / "default" / "default.sqlite.xz")


@pytest.mark.parametrize(
    "generic, words, known_after_reading",
    [
        ("garbage", "--generic 'garbage' is not NAME=VALUE", False),
        ("=3", "--generic '=3' is not NAME=VALUE", False),
        ("BLOCK_X=1e999,BLOCK_Y=4", "--generic BLOCK_X = '1e999' is not a whole number", False),
        ("BLOCK_X=32,BLOCK_X=32", "BLOCK_X is given twice", False),
        ("FOO=1", "FOO is not a parameter of gemm_naive; no value for BLOCK_X", True),
        ("BLOCK_X=32", "no value for BLOCK_Y", True),
        ("BLOCK_X=33,BLOCK_Y=4", "BLOCK_X = 33 is not one of its values", True),
    ],
)
def test_a_generic_that_is_not_an_instance_of_the_generic_space_is_one_line(
    tmp_path: Path, generic: str, words: str, known_after_reading: bool
) -> None:
    """`emit --generic garbage` and `--generic FOO=1` warned 'generic kernel gemm_naive without name expressions: not
    enough values to unpack (expected 2, got 1)' and wrote the table, exit 0. Text that is not NAME=VALUE,... is
    refused before the database is read (here: there is none); names and values once the kind's space is known."""
    out = tmp_path / "t.json"
    source = GEMM_DB if known_after_reading else str(tmp_path / "missing.sqlite")
    r = cli("emit", source, "--generic", generic, "-o", str(out), real=generic == "garbage", cwd=tmp_path)
    one_line(r, words, "what to do:")
    assert not list(tmp_path.iterdir())


def test_a_generic_for_a_kind_without_a_generic_kernel_warns(tmp_path: Path) -> None:
    r = cli("emit", str(EXAMPLE_DB), "--generic", "BLOCK_X=16,BLOCK_Y=8", "-o", "t.json", cwd=tmp_path)
    assert r.returncode == 0 and "the kind transpose has no generic kernel; ignored" in r.stderr, r.stderr[-3000:]


def test_an_unknown_fallback_is_one_line_before_the_database_is_read(tmp_path: Path) -> None:
    """--fallback xyz said which words it takes but had no what to do, and only once the database was read."""
    r = cli("emit", str(tmp_path / "missing.sqlite"), "--fallback", "xyz", cwd=tmp_path)
    one_line(r, "--fallback must be one of generic, library, naive, none, got 'xyz'", "what to do: write --fallback")


@pytest.mark.parametrize("option", ["--device", "--space"])
@pytest.mark.parametrize("command", ["emit", "analyze"])
def test_a_device_or_space_with_no_measurements_names_those_there_are(
    tmp_path: Path, command: str, option: str
) -> None:
    """`emit DB --device nosuch` said 'no measurements in DB for device='nosuch' ...' without what to do."""
    r = cli(command, str(EXAMPLE_DB), option, "nosuch", cwd=tmp_path)
    one_line(
        r, f"{option[2:]}='nosuch'", "what to do: give --device", "NVIDIA H100 80GB HBM3 (GPU-", ": transpose_tiled"
    )
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------- a command line that does not parse
@pytest.mark.parametrize(
    "args, words, command",
    [
        (("emit", str(EXAMPLE_DB), "--format", "xml"), "Invalid value for '--format'", "emit"),
        (("emit", str(EXAMPLE_DB), "--bk", "abc"), "Invalid value for '--bk'", "emit"),
        (("compare", str(EXAMPLE_DB)), "Missing option '--by'", "compare"),
        (("space", "list", "gemm_naive", "--sample", "0"), "Invalid value for '--sample'", "space list"),
        (("db", "pack"), "Missing argument", "db pack"),
        (("space", "nosuch"), "No such command 'nosuch'", "space"),
        (("--bogus",), "No such option: --bogus", ""),
    ],
)
def test_a_command_line_that_does_not_parse_is_one_line(tmp_path: Path, args: tuple, words: str, command: str) -> None:
    """typer's usage errors were a box (Usage:, Try ..., a panel of the message) unlike every other error; now one
    `error:` line and the command's --help as what to do, exit code 2, for every command (autotune.cli.main)."""
    r = cli(*args, real=args[0] == "emit" and args[-1] == "xml", cwd=tmp_path)
    one_line(r, words, f"{command} --help`" if command else "--help`")
    assert args[-1] != "xml" or "run `python -m autotune emit --help`" in r.stderr  # the command as typed
    assert "Usage:" not in r.stderr and "╭" not in r.stderr


def test_a_command_without_arguments_still_shows_its_help() -> None:
    r = cli("space", real=True)
    assert r.returncode == 2 and "error:" not in r.stderr and "list" in r.stdout + r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("space", "list", "gemm_naive", "--sample", "3", "--seed", str(2**32)),
        ("sweep", str(ROOT / "configs" / "default.yaml"), "--seed", str(10**13), "--strategy", "tpe", "--budget", "3"),
        ("validate", str(EXAMPLE_TABLE), "--random", "3", "--seed", "-1"),
        ("active", str(EXAMPLE_DB), "--seed", str(10**35)),
    ],
    ids=lambda a: " ".join(a[:1]),
)
def test_a_seed_beyond_what_numpy_takes_is_refused_before_any_work(tmp_path: Path, args: tuple) -> None:
    """sweep --seed 10**13 with a model-based strategy was numpy's 'Seed must be between 0 and 2**32 - 1' traceback
    from Optuna's sampler, after the database was made; space list took any seed, validate and active a negative one
    (the same draws as its absolute value). Every seed is 0..2**32-1 (autotune.vocab.MAX_SEED)."""
    db = tmp_path / "s.sqlite"
    extra = ("--replay", RECORDED, "--db", str(db), "--quiet") if args[0] == "sweep" else ()
    one_line(cli(*args, *extra, real=args[0] == "sweep", cwd=tmp_path), "Invalid value for '--seed'")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args",
    [
        ("validate", str(EXAMPLE_TABLE), "--random", str(10**20), "--space", str(EXAMPLE / "space.yaml"), "-o", "v"),
        (
            "validate",
            str(EXAMPLE_TABLE),
            "--random",
            "300",
            "--max-problems",
            "200",
            "--space",
            str(EXAMPLE / "space.yaml"),
        ),
        ("active", str(EXAMPLE_DB), "--config", str(EXAMPLE / "sweep.yaml"), "--heldout", str(10**20), "-o", "a"),
    ],
    ids=["validate", "validate --max-problems", "active"],
)
def test_more_random_problems_than_the_problem_limit_is_one_line(tmp_path: Path, args: tuple) -> None:
    """validate --random 10**20 drew problems until it had taken 8 GB (killed); active --heldout 10**20 likewise,
    after making its first round's folder. Both are held to the limit of a --points file (AUTOTUNE_MAX_PROBLEMS)."""
    r = cli(*args, "--replay", str(EXAMPLE_DB), real=args[0] == "active", cwd=tmp_path, timeout=60)
    line = one_line(r, "more held-out problems than the limit of 200", "AUTOTUNE_MAX_PROBLEMS=")
    # the hint names the limit's option only where the command has one (active has no --max-problems)
    assert ("--max-problems" in r.stderr.replace(line, "")) == (args[0] == "validate"), r.stderr
    assert not list(tmp_path.iterdir())


NO_GPU = pytest.mark.skipif("not __import__('autotune.devices').devices.no_gpu_reason()", reason="a GPU is here")


@NO_GPU
@pytest.mark.parametrize(
    "args",
    [
        ("validate", str(EXAMPLE_TABLE), "--random", "3", "--space", str(EXAMPLE / "space.yaml"), "-o", "val"),
        ("active", str(EXAMPLE_DB), "--config", str(EXAMPLE / "sweep.yaml"), "-o", "act"),
    ],
)
def test_validate_or_active_without_a_gpu_or_replay_writes_nothing(tmp_path: Path, args: tuple) -> None:
    """validate wrote OUT/validate_sweep.yaml, active OUT/round0/dispatch.json, before the sweep said there is no
    GPU: now the same error (what --replay does) comes before anything is written."""
    one_line(cli(*args, cwd=tmp_path), "no GPU", "--replay DB")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["validate", "active"])
def test_a_negative_pool_bk_is_one_line(tmp_path: Path, command: str) -> None:
    """--pool-bk -1 was taken as 0 (the table's kernels only) without a word."""
    first = (str(EXAMPLE_TABLE), "--random", "3") if command == "validate" else (str(EXAMPLE_DB), "--config", "c")
    r = cli(command, *first, "--pool-bk", "-1", "--replay", str(EXAMPLE_DB), "-o", "o", cwd=tmp_path)
    one_line(r, "--pool-bk = -1 is not a whole number of at least 0")
    assert not list(tmp_path.iterdir())


def test_a_config_seed_beyond_what_numpy_takes_is_one_line_at_its_line(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text((ROOT / "configs" / "default.yaml").read_text().replace("\nseed: 0\n", f"\nseed: {2**32}\n"))
    r = cli("sweep", str(config), "--replay", RECORDED, "--db", str(tmp_path / "s.sqlite"), cwd=tmp_path)
    assert "c.yaml:" in one_line(r, "expected an integer from 0 to 4294967295, got 4294967296")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["c.yaml"]


def test_a_sample_larger_than_the_space_lists_every_instance(tmp_path: Path) -> None:
    """Documented in --help: N at least the matching instances lists them all (no sample)."""
    r = cli("space", "list", "gemm_naive", "--sample", str(10**30), "--limit", "0", cwd=tmp_path)
    assert r.returncode == 0 and "14 shown; 14 match (14 in the space)" in r.stdout, r.stderr[-3000:]


# ------------------------------------------------------------------------------------- a --validity file that is not one
VALIDITY = [
    (b"", "not valid JSON"),
    (bytes(range(256)) * 4, "not a text file"),
    (b"[1, 2]", "a validity file is a JSON object, not list"),
    (b'{"transpose_tiled": {"min_rows": 8}}', "a list of predicate objects expected"),
    (b'{"transpose_tiled": [{"rows_multiple_of": 0}]}', "rows_multiple_of = 0 is not a whole number of at least 1"),
    (b'{"transpose_tiled": [{"max_rows": "abc"}]}', "max_rows = 'abc' is not a whole number"),
    (b'{"transpose_tiled": [{"max_rows": 1e999}]}', "max_rows = inf is not a whole number"),
    (b'{"transpose_tiled": [{"bogus": 3}]}', "unknown validity predicate 'bogus'"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deep"),
]


@pytest.mark.parametrize("data, words", VALIDITY, ids=range(len(VALIDITY)))
def test_a_validity_file_that_is_not_one_is_one_line(tmp_path: Path, data: bytes, words: str) -> None:
    """--validity was read by json.loads and used unchecked: a traceback for each of these (JSONDecodeError,
    UnicodeDecodeError, AttributeError, ZeroDivisionError for a multiple of 0, ValueError, RecursionError)."""
    f = tmp_path / "valid.json"
    f.write_bytes(data)
    out = tmp_path / "t.cuh"
    r = cli("emit", str(EXAMPLE_DB), "--validity", str(f), "-o", str(out), real=data.startswith(b"[["), cwd=tmp_path)
    assert "valid.json" in one_line(r, words)
    assert not out.exists()


def test_a_validity_file_naming_nothing_measured_warns(tmp_path: Path) -> None:
    """A name that is neither an instance nor a space of the database applied nowhere, without a word."""
    f = tmp_path / "valid.json"
    f.write_text('{"transpose_typo": [{"min_rows": 8}]}')
    r = cli("emit", str(EXAMPLE_DB), "--validity", str(f), "-o", str(tmp_path / "t.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "neither an instance nor a space of the measurements" in r.stderr and "'transpose_typo'" in r.stderr


# ------------------------------------------------------------------------------ a file that is not an SQLite database
NOT_SQLITE = [
    (bytes(range(256)) * 16, "is not an SQLite database (its first bytes are"),
    (b"name: x\n", "is not an SQLite database (its first bytes are"),
    (EXAMPLE_DB.read_bytes(), "is not an SQLite database: it is xz-compressed"),
]
DB_COMMANDS = [
    ("analyze", "{db}"),
    ("emit", "{db}", "-o", "{tmp}/t.json"),
    ("query", "SELECT 1", "--db", "{db}"),
    ("db", "upgrade", "{db}"),
    ("sweep", str(ROOT / "configs" / "default.yaml"), "--replay", str(EXAMPLE_DB), "--db", "{db}"),
]


@pytest.mark.parametrize("command", DB_COMMANDS, ids=lambda c: c[0] if c[0] != "db" else "db upgrade")
@pytest.mark.parametrize("data, words", NOT_SQLITE, ids=["binary", "text", "xz"])
def test_a_file_that_is_not_an_sqlite_database_is_one_line(
    tmp_path: Path, command: tuple[str, ...], data: bytes, words: str
) -> None:
    """Said 'cannot open database ...: file is not a database' with the hint 'check that the directory exists and
    that you may write the file' (misleading), `query "SELECT 1"` printed 1, `db upgrade` was a DatabaseError
    traceback; the file is left as it was."""
    db = tmp_path / "results.sqlite"
    db.write_bytes(data)
    r = cli(*(a.format(db=db, tmp=tmp_path) for a in command), real=command[0] == "sweep", cwd=tmp_path)
    assert "results.sqlite" in one_line(r, words)
    assert db.read_bytes() == data
    assert sorted(f.name for f in tmp_path.iterdir()) == ["results.sqlite"]


@pytest.mark.parametrize(
    "command",
    [("export", "kerneltuner", "{db}", "--space", "x", "-o", "{tmp}/c.json"), *DB_COMMANDS[:4]],
    ids=lambda c: " ".join(c[:2]) if c[0] in ("db", "export") else c[0],
)
def test_an_empty_file_where_a_database_is_read_is_one_line(tmp_path: Path, command: tuple[str, ...]) -> None:
    """A 0-byte file (an interrupted copy, `xz -dc` of a missing file) said 'holds no results yet', what to do 'run
    a sweep into it first' (export, analyze, emit); `query "SELECT 1"` printed 1; `db upgrade` said 'no schema_meta
    table' and wrote 4,096 bytes into it. A sweep into an empty file still makes its database there."""
    db = tmp_path / "results.sqlite"
    db.touch()
    r = cli(*(a.format(db=db, tmp=tmp_path) for a in command), cwd=tmp_path)
    assert "results.sqlite is an empty file (0 bytes), not a results database" in one_line(r, "what to do:")
    assert db.read_bytes() == b""
    assert sorted(f.name for f in tmp_path.iterdir()) == ["results.sqlite"]


def test_db_pack_of_another_tools_sqlite_file_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """`db pack` packed any SQLite file without a word (db upgrade and every reader refuse it)."""
    import sqlite3

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (a)")
    conn.close()
    before = other.read_bytes()
    one_line(cli("db", "pack", str(other), cwd=tmp_path), "other.sqlite is not an autotune results database")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["other.sqlite"] and other.read_bytes() == before


@pytest.mark.parametrize("where", ["missing.sqlite", "no_folder/x.sqlite", "a_folder", "sqlite:///{tmp}/no/x.sqlite"])
def test_db_upgrade_of_no_database_is_one_line_and_makes_none(tmp_path: Path, where: str) -> None:
    """A missing file was created (an empty database) and called 'not an autotune results database'; a folder or a
    missing folder was an OperationalError traceback."""
    (tmp_path / "a_folder").mkdir()
    target = where.format(tmp=tmp_path) if "://" in where else str(tmp_path / where)
    one_line(cli("db", "upgrade", target, cwd=tmp_path), "no SQLite database at", "nothing to upgrade")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["a_folder"]
    assert not list((tmp_path / "a_folder").iterdir())


# ---------------------------------------------------------------------------- a CSV that is not a measurements table
CSVS = [
    (b"a,b\n1,2\n", 1, "no column instance_id"),
    (bytes(range(256)) * 4, 1, "not a text file"),
    ("é,ü\n1,2\n".encode("latin-1"), None, "not UTF-8"),
    (b"", None, "not a measurements CSV"),
    (
        b"instance_id,precision,shape,m,status,median_ms,p20_ms,p80_ms\nx,fp32,NN,64,ok,1,1,1\nx,fp32,NN,abc,ok,1,1,1\n",
        3,
        "size m = 'abc'",
    ),
    (b"instance_id,precision,shape,status,m,median_ms,p20_ms,p80_ms\nx,fp32,NN,ok,3,1,1,1\n", 1, "no size columns"),
]


@pytest.mark.parametrize("command", ["analyze", "report", "emit"])
@pytest.mark.parametrize("data, line, words", CSVS, ids=range(len(CSVS)))
def test_a_csv_that_is_not_measurements_is_one_line(tmp_path: Path, command: str, data: bytes, line, words) -> None:
    f = tmp_path / "m.csv"
    f.write_bytes(data)
    error = one_line(cli(command, str(f), real=command == "report" and data == CSVS[0][0], cwd=tmp_path), words)
    assert f"m.csv{f':{line}' if line else ''}: " in error, error


# ------------------------------------------------------------------------------------- explore: a huge value range
def test_explore_draws_a_huge_range_in_bins_and_the_bound_is_a_knob(tmp_path: Path) -> None:
    """A parameter of 2^16 values: every chart draws at most AUTOTUNE_EXPLORE_MAX_VALUES bars (default 200) of
    binned neighbouring values (2^24 values took 9.2 GB and died: one label per value, maps of 4 x 2^24 cells)."""
    pytest.importorskip("plotly")
    space = tmp_path / "wide.yaml"
    space.write_text(
        (ROOT / "spaces" / "gemm_naive.yaml")
        .read_text()
        .replace("BLOCK_Y: [1, 2, 4, 8, 16]", "BLOCK_Y: {start: 1, stop: 65536}")
    )
    allow = ("--allow-path", str(ROOT / "kernels_src"))
    r = cli(*allow, "explore", str(space), "-o", "wide.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    page = (tmp_path / "wide.html").read_text()
    assert '"65273..65536"' in page and '"40000"' not in page  # 200 bins of 328 values, not 65,536 labels
    assert "BLOCK_Y (65,536 values in bins of 328)" in page
    r = cli(*allow, "explore", str(space), "-o", "few.html", cwd=tmp_path, AUTOTUNE_EXPLORE_MAX_VALUES="16")
    assert r.returncode == 0 and '"61441..65536"' in (tmp_path / "few.html").read_text()
    for bad in ("abc", "1e999", "-5", "nan", "1"):
        r = cli(*allow, "explore", str(space), "-o", "x.html", cwd=tmp_path, AUTOTUNE_EXPLORE_MAX_VALUES=bad)
        one_line(r, "AUTOTUNE_EXPLORE_MAX_VALUES")


# ------------------------------------------------------------------------------ a table point of size <= 0 (tampered)
@pytest.mark.parametrize("size", [0, -5, 2.5, "64", True, 10**30])
@pytest.mark.parametrize("command", ["validate", "emit"])
def test_a_table_point_that_is_not_a_size_is_one_line(tmp_path: Path, command: str, size: object) -> None:
    import json

    data = json.loads(EXAMPLE_TABLE.read_text())
    data["points"][0]["sizes"]["rows"] = size
    table = tmp_path / "dispatch.json"
    table.write_text(json.dumps(data))
    args = {
        "validate": ("--random", "3", "--space", str(EXAMPLE / "space.yaml"), "-o", str(tmp_path / "v")),
        "emit": ("-f", "cpp"),
    }[command]
    r = cli(command, str(table), *args, real=command == "emit" and size == 0, cwd=tmp_path)
    assert "size rows" in one_line(r, "dispatch.json: point", "whole number of at least 1")


# ---------------------------------------------------------------------------------------------- --gpus 99999
@pytest.mark.parametrize(
    "gpus, words",
    [
        ("99999", "at most 64 workers"),
        ("65", "at most 64 workers"),
        ("0,1,0", "GPU 0 listed twice"),
        (",".join(map(str, range(100))), "100 GPUs listed"),
        ("1e999", "--gpus must be"),
        ("x" * 500, "--gpus must be"),
    ],
)
@pytest.mark.parametrize("replay", [True, False])
def test_gpus_is_bounded_before_any_worker_starts(tmp_path: Path, gpus: str, words: str, replay: bool) -> None:
    """--gpus 99999 started 99,999 worker processes (with --replay, or where no GPU is visible)."""
    pytest.importorskip("distributed")
    if replay and "," in gpus:
        words = "--gpus must be"  # a replay takes a number of workers, not a list of GPUs
    args = ("--replay", str(EXAMPLE_DB)) if replay else ()
    config = str(ROOT / "configs" / "default.yaml")
    r = cli("sweep", config, "--gpus", gpus, *args, real=gpus == "99999", cwd=tmp_path, timeout=60)
    one_line(r, words)
    assert not (tmp_path / "results").exists()


# ------------------------------------------------------------------------------------------- environment knobs
CONFIG = str(ROOT / "configs" / "default.yaml")
RECORDED = str(ROOT / "results" / "default" / "default.sqlite.xz")
WORKLOAD = str(ROOT / "configs" / "workloads" / "small_h100.yaml")
# every numeric AUTOTUNE_* knob, and a real command that reads it on a machine without a GPU
KNOBS = {
    "AUTOTUNE_MAX_RAW": ("space", "show", "gemm_naive"),
    "AUTOTUNE_MAX_SURVIVORS": ("space", "show", "gemm_naive"),
    "AUTOTUNE_MAX_PROBLEMS": ("workload", "show", WORKLOAD),
    "AUTOTUNE_MAX_PAIRS": ("workload", "config", WORKLOAD, "--space", "gemm_naive", "--out", "s.yaml"),
    "AUTOTUNE_MAX_CACHE_MB": ("import", "kerneltuner", "{cache}", "--db", "k.sqlite"),
    "AUTOTUNE_MAX_CACHE_ENTRIES": ("import", "kerneltuner", "{cache}", "--db", "k.sqlite"),
    "AUTOTUNE_GPU_MEMORY": ("sweep", CONFIG, "--replay", RECORDED, "--db", "r.sqlite", "--quiet"),
    "AUTOTUNE_REPLAY_DELAY": ("sweep", CONFIG, "--replay", RECORDED, "--db", "r.sqlite", "--quiet"),
    "AUTOTUNE_DB_RETRY_S": ("sweep", CONFIG, "--replay", RECORDED, "--db", "r.sqlite", "--quiet"),
    "AUTOTUNE_EXPLORE_MAX_VALUES": ("explore", "gemm_naive", "-o", "e.html"),
}


@pytest.mark.parametrize("value", ["abc", "1e999", "-1", "nan"])
@pytest.mark.parametrize("knob", list(KNOBS))
def test_a_bad_environment_knob_is_one_line_naming_it(tmp_path: Path, knob: str, value: str) -> None:
    """AUTOTUNE_MAX_RAW=1e999 was an OverflowError, =abc the default without a word; each knob is read by
    autotune.untrusted now."""
    if knob == "AUTOTUNE_EXPLORE_MAX_VALUES":
        pytest.importorskip("plotly")
    (tmp_path / "cache.json").write_text("{}")
    args = [a.format(cache=tmp_path / "cache.json") for a in KNOBS[knob]]
    r = cli(*args, real=value == "abc" and knob == "AUTOTUNE_MAX_RAW", cwd=tmp_path, **{knob: value})
    one_line(r, knob)


def test_a_bad_pairs_limit_fails_before_the_workload_is_read(tmp_path: Path) -> None:
    """`workload config` read AUTOTUNE_MAX_PAIRS after it had loaded the workload and planned the sweep (2 s here
    before the one line); it is read first now, like the output path: with no workload file at all it is what fails."""
    r = cli(
        "workload",
        "config",
        "missing.yaml",
        "--space",
        "gemm_naive",
        "--out",
        "s.yaml",
        cwd=tmp_path,
        **{"AUTOTUNE_MAX_PAIRS": "abc"},
    )
    one_line(r, "AUTOTUNE_MAX_PAIRS")


# the compile knobs are read where the GPU backend and its compile pool start (no GPU here: called as the sweep does)
COMPILE_KNOBS = {
    "AUTOTUNE_COMPILE_TIMEOUT": "from autotune.sweep.backends.local import GpuBackend, LocalOptions; "
    "GpuBackend(LocalOptions(cache_dir='c'))",
    "AUTOTUNE_COMPILE_WORKERS": "from autotune.sweep.backends.local import GpuBackend, LocalOptions; "
    "GpuBackend(LocalOptions(cache_dir='c'))",
    "AUTOTUNE_COMPILE_NICE": "import multiprocessing as mp; from autotune.sweep.compile.compile_pool import CompilePool; "
    "CompilePool(1, mp.get_context('spawn'))",
}


@pytest.mark.parametrize("value", ["abc", "1e999", "-1", "nan"])
@pytest.mark.parametrize("knob", list(COMPILE_KNOBS))
def test_a_bad_compile_knob_is_a_user_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knob: str, value: str
) -> None:
    """A negative or NaN AUTOTUNE_COMPILE_TIMEOUT meant no limit; AUTOTUNE_COMPILE_WORKERS=-1 meant 1 and
    AUTOTUNE_COMPILE_NICE=abc normal priority, without a word. Called in this process; `abc` in a fresh process too
    (the knob read where a process starts its backend, nothing read before)."""
    import os
    import sys

    from autotune.errors import UserError

    if value == "abc":
        code = (
            f"from autotune.errors import UserError\ntry:\n    {COMPILE_KNOBS[knob]}\n"
            "except UserError as e:\n    print(e)"
        )
        env = dict(os.environ, PYTHONPATH=str(ROOT), **{knob: value})
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
        )
        assert r.returncode == 0 and r.stdout.startswith(f"{knob} = '{value}' is not"), (r.stdout, r.stderr[-2000:])
        return
    monkeypatch.setenv(knob, value)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as raised:
        exec(COMPILE_KNOBS[knob], {})
    assert str(raised.value).startswith(f"{knob} = '{value}' is not"), str(raised.value)


def test_only_the_off_words_mean_no_compile_limit() -> None:
    from autotune.sweep.compile.nvrtc import compile_timeout_s

    assert [compile_timeout_s(w) for w in ("0", "off", "OFF", " none ", "no", "false")] == [None] * 6
    assert compile_timeout_s("1.5") == 1.5 and compile_timeout_s("") == 600.0


# ------------------------------------------------------------------------------- explorer page: data in a <script>
HOSTILE_STRINGS = ["<!--<script>", "</script><script>alert(1)</script>", "x' onload='y", "a\u2028b\u2029 & c"]


def hostile_space(tmp: Path) -> Path:
    """gemm_naive with a description and a string parameter whose values would end or swallow a <script>."""
    import json

    text = (ROOT / "spaces" / "gemm_naive.yaml").read_text()
    values = ", ".join(json.dumps(v) for v in HOSTILE_STRINGS)
    text = text.replace("description: One thread", "description: <!--<script> One thread")
    text = text.replace("  BLOCK_Y: [1, 2, 4, 8, 16]\n", f"  BLOCK_Y: [1, 2, 4, 8, 16]\n  TAG: [{values}]\n")
    path = tmp / "hostile.yaml"
    path.write_text(text)
    return path


def test_data_strings_cannot_end_or_swallow_the_explorer_script(tmp_path: Path) -> None:
    """`<!--<script>` in a data string put the HTML tokenizer in the script's double-escaped state: the page's own
    </script> no longer ended the data element and the code after it was swallowed (a blank page). Inside the data
    element there is now no `<!--` and no `</script`, and the JSON still holds every string as it was."""
    import json
    import re

    pytest.importorskip("plotly")
    space = hostile_space(tmp_path)
    r = cli("--allow-path", str(ROOT / "kernels_src"), "explore", str(space), "-o", "h.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    page = (tmp_path / "h.html").read_text()
    start = page.index("<script id='explore-data' type='application/json'>")
    data = page[start:].split(">", 1)[1].split("</script>", 1)[0]
    assert "<!--" not in data and not re.search("</script", data, re.I) and "<" not in data and "\u2028" not in data
    assert page.endswith("</script></body></html>\n") and page.count("<script") == 3
    labels = {v for fig in json.loads(data)["figures"] for trace in fig["data"] for v in trace.get("x") or []}
    assert set(HOSTILE_STRINGS) <= labels  # the strings as they were, escaped only for the script


def test_explore_reads_a_database_by_its_content_not_its_name(tmp_path: Path) -> None:
    """A results database named results.bin went to the space loader (by its name) and was refused as binary."""
    pytest.importorskip("plotly")
    from autotune.store.store import Store

    with Store.open(f"sqlite:///{tmp_path / 'results.bin'}"):
        pass
    r = cli("explore", str(tmp_path / "results.bin"), "-o", "x.html", cwd=tmp_path)
    assert r.returncode == 0 and "results)" in r.stdout, r.stderr[-2000:]


def test_an_unknown_precision_of_a_kernel_tuner_import_is_one_line(tmp_path: Path) -> None:
    """import kerneltuner -p fp99 was TestPoint's ValueError traceback (the files it made were removed)."""
    cache = ROOT / "tests" / "data" / "kerneltuner" / "matmul_cache.json"
    r = cli(
        "import", "kerneltuner", str(cache), "--db", "d.sqlite", "--space-out", "s.yaml", "-p", "fp99", cwd=tmp_path
    )
    one_line(r, "unknown precision 'fp99'", "fp64, fp32")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "args, words",
    [
        (("model", "tsm2-where", "--n", str(10**24)), "is above 65,536"),
        (("model", "tsm2-where", "--m", str(10**26)), "less than or equal to"),
        (
            ("model", "tsm2", str(ROOT / "results" / "tsm2_h100" / "tsm2_h100.sqlite.xz"), "--csv", "nf/x.csv"),
            "nf/x.csv",
        ),
    ],
    ids=["n", "m", "csv"],
)
def test_a_tsm2_model_size_or_csv_that_cannot_be_is_one_line(tmp_path: Path, args: tuple, words: str) -> None:
    """model tsm2-where --n 10**24 never ended (the model tries every t2 up to n), --m 10**26 printed a time of
    1e43 ms; model tsm2 --csv in a missing folder was pandas' OSError traceback after the table was printed."""
    one_line(cli(*args, cwd=tmp_path), words)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("db", ["k.sqlite", "old.sqlite"])
def test_a_kernel_tuner_cache_without_results_is_one_line_and_writes_nothing(tmp_path: Path, db: str) -> None:
    """A cache whose "cache" object is empty imported 0 configurations, exit 0: a new database with an empty sweep
    `done` and a space file written from its tune_params. Now one line naming the cache; a new database and the
    space file are not left behind, a database that was there is untouched."""
    import json

    from autotune.store.store import Store

    data = json.loads((ROOT / "tests" / "data" / "kerneltuner" / "matmul_cache.json").read_text())
    data["cache"] = {}
    cache = tmp_path / "empty_cache.json"
    cache.write_text(json.dumps(data))
    with Store.open(f"sqlite:///{tmp_path / 'old.sqlite'}"):
        pass
    before = (tmp_path / "old.sqlite").read_bytes()
    line = one_line(cli("import", "kerneltuner", str(cache), "--db", db, cwd=tmp_path), "what to do:")
    assert "empty_cache.json: the cache holds no results" in line, line
    assert sorted(f.name for f in tmp_path.iterdir()) == ["empty_cache.json", "old.sqlite"]
    assert (tmp_path / "old.sqlite").read_bytes() == before


@pytest.mark.parametrize("missing", ["config", "recorded"])
def test_active_with_a_missing_space_file_is_one_line_and_writes_nothing(tmp_path: Path, missing: str) -> None:
    """A tuning config naming a space file that is not there was found only when the first round's worst problems
    were swept (after its table and its validation were written); a space file the tuning database recorded that
    is gone (here a copy of the database whose recorded path is nowhere) after OUT/round0/dispatch.json was written.
    Both are one line now, before OUT is made."""
    import sqlite3

    from autotune.store.packing import unpack

    spaces = "[nosuch_space.yaml]" if missing == "config" else f"[{EXAMPLE / 'space.yaml'}]"
    config = tmp_path / "c.yaml"
    config.write_text((EXAMPLE / "sweep.yaml").read_text().replace("spaces: [space.yaml]", f"spaces: {spaces}"))
    db, made = EXAMPLE_DB, ["c.yaml"]
    if missing == "recorded":
        db, made = tmp_path / "db" / "t.sqlite", ["c.yaml", "db"]
        db.parent.mkdir()
        unpack(EXAMPLE_DB, db)
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE spaces SET yaml_path = 'nowhere/space.yaml'")
    out = tmp_path / "act"
    args = ("--config", str(config), "--replay", str(EXAMPLE_DB), "--heldout", "3", "-o", str(out))
    r = cli("active", str(db), *args, cwd=ROOT if missing == "config" else tmp_path)
    if missing == "config":
        assert "c.yaml:5: no space file nosuch_space.yaml" in one_line(r)
    else:
        one_line(r, "no space file for space 'transpose_tiled'", "nowhere/space.yaml is gone; looked for")
    assert sorted(f.name for f in tmp_path.iterdir()) == made


@pytest.mark.parametrize(
    "args",
    [("--rounds", "2", "--add", "1"), ("--seed-from", "earlier", "--rounds", "1", "--add", "1")],
    ids=["a second round", "--seed-from"],
)
def test_active_that_adds_points_to_a_packed_database_is_one_line_and_writes_nothing(
    tmp_path: Path, args: tuple
) -> None:
    """A packed (.sqlite.xz) tuning database ran round 0 and wrote it to OUT, then failed with "a packed database is
    read-only here" when it added the round's worst problems to it. It is refused before OUT is made now, with how to
    unpack it; a run that adds nothing (--rounds 1) reads it as before."""
    out = tmp_path / "act"
    extra = ("--config", str(EXAMPLE / "sweep.yaml"), "--replay", str(EXAMPLE_DB), "--heldout", "3", "-o", str(out))
    r = cli("active", str(EXAMPLE_DB), *args, *extra, cwd=tmp_path)
    line = one_line(r, f"autotune db unpack {EXAMPLE_DB} --out {EXAMPLE_DB.with_suffix('')}", "--rounds 1")
    assert f"{EXAMPLE_DB}: the tuning database must be a plain .sqlite file" in line, line
    assert not list(tmp_path.iterdir())


def test_active_that_adds_nothing_reads_a_packed_database(tmp_path: Path) -> None:
    out = tmp_path / "act"
    extra = ("--config", str(EXAMPLE / "sweep.yaml"), "--replay", str(EXAMPLE_DB), "--heldout", "3", "-o", str(out))
    r = cli("active", str(EXAMPLE_DB), "--rounds", "1", *extra, cwd=tmp_path)  # (its space file recorded relative)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "active.json").is_file()


def test_validate_from_another_folder_finds_a_space_file_recorded_relative_to_the_repository(tmp_path: Path) -> None:
    """A sweep run from the repository root records its space file as examples/transpose/space.yaml; validate run
    from any other folder said that file "is gone" (the path was looked up from the current folder only). It is
    looked up as the analysis finds recorded spaces now: re-rooted under the database's folder and its parents."""
    out = tmp_path / "val"
    db = str(EXAMPLE_DB)
    r = cli("validate", str(EXAMPLE_TABLE), "--db", db, "--random", "3", "--replay", db, "-o", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "validation.csv").is_file()


def test_a_recorded_space_file_that_is_truly_gone_names_where_it_was_looked_for(tmp_path: Path) -> None:
    import sqlite3

    from autotune.store.packing import unpack

    db = tmp_path / "t.sqlite"
    unpack(EXAMPLE_DB, db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE spaces SET yaml_path = 'nowhere/space.yaml'")
    r = cli("validate", str(EXAMPLE_TABLE), "--db", str(db), "--random", "3", "-o", "val", cwd=tmp_path)
    line = one_line(r, "no space file for space 'transpose_tiled'", "recorded file nowhere/space.yaml is gone")
    for where in (str(tmp_path / "nowhere" / "space.yaml"), f"under {tmp_path} and its parents"):
        assert where in line, line
    assert sorted(f.name for f in tmp_path.iterdir()) == ["t.sqlite"]


def test_emit_says_which_options_a_table_file_ignores(tmp_path: Path) -> None:
    """`autotune emit dispatch.json` writes the table as it is: options that build a table from a results database
    are named in one warning line (they were ignored silently); without them, no warning."""
    r = cli("emit", str(EXAMPLE_TABLE), "--tol", "0.2", "--structure", "cost", "-o", str(tmp_path / "t.cuh"))
    assert r.returncode == 0, r.stderr[-3000:]
    warned = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    assert len(warned) == 1 and "--tol, --structure: ignored for a table file" in warned[0], r.stderr
    assert (tmp_path / "t.cuh").is_file()
    r = cli("emit", str(EXAMPLE_TABLE), "-o", str(tmp_path / "u.cuh"))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr[-3000:]
