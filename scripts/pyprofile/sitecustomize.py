"""Profile every Python process of a run (developer tool): with this folder first on PYTHONPATH and AUTOTUNE_DEVPROF
set to a folder, each process (the run's, its GPU worker, its compile processes) profiles itself with cProfile from
its start and writes DIR/p<pid>.prof at its exit. On Python 3.12, cProfile sees every thread of a process.

    AUTOTUNE_DEVPROF=runs/prof PYTHONPATH=scripts/pyprofile:$PWD \\
        python3 scripts/bench_kt_switch.py --out runs/kt --cases reduction --sides ours --cap 20
    python3 scripts/pyprofile/summary.py runs/prof

Replaces any other sitecustomize for that run. A process killed (SIGKILL, os._exit) writes nothing."""

import os

_folder = os.environ.get("AUTOTUNE_DEVPROF")
if _folder:
    import atexit
    import cProfile

    _profile = cProfile.Profile()
    _profile.enable()

    def _dump() -> None:
        _profile.disable()
        try:
            os.makedirs(_folder, exist_ok=True)
            _profile.dump_stats(os.path.join(_folder, f"p{os.getpid()}.prof"))
        except OSError:
            pass

    atexit.register(_dump)
