"""One signal path: SIGINT (Ctrl-C) and SIGTERM (`kill`, a batch scheduler's end of job, systemd) stop every command
the same way, promptly, and once.

While the handlers are installed (`install` for the whole `autotune` process, `handling` for a block):
- the first signal raises KeyboardInterrupt in the main thread, wherever the command is: a sweep records its pairs
  in flight as not measured (a resume measures them), and the command line prints `interrupted`, exit code 130;
- a first signal that arrives inside a `deferred()` block (a cleanup that must not be cut halfway: a sweep's last
  transaction) is held until the block ends, and raised there;
- a KeyboardInterrupt that Python swallows (raised while a weakref callback or a `__del__` runs: "Exception
  ignored in ...", seen in `analyze`, which then ran to its end) is raised again a moment later (`_lost`);
- later signals (a second Ctrl-C, SIGTERM after SIGINT, a batch scheduler that signals every process of the job) do
  not interrupt the stop the first one started: they are ignored, so its cleanup finishes. One that comes
  `FORCE_AFTER_S` or more after the first, outside a `deferred()` block, raises KeyboardInterrupt once more (a
  cleanup that hangs can still be cut by hand);
- from the process's last exit handler on, a stopping process ignores both (`_exiting`).

Standard library only: `python -m autotune` installs the handlers before it imports the rest.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import sys
import threading
import time
from typing import Any, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)
FORCE_AFTER_S = 10.0  # a signal this long after the first, with the stop not done, cuts the cleanup
AGAIN_AFTER_S = 0.02  # a swallowed KeyboardInterrupt is raised again this long after (outside the callback)


class _State:
    previous: dict[int, Any] | None = None  # the handlers ours replaced (None: ours are not installed)
    hook: Any = None  # the sys.unraisablehook ours replaced
    first_at: float | None = None  # time.monotonic() of the first signal
    signum: int = signal.SIGINT  # the first signal
    raised = False  # the first signal's KeyboardInterrupt has been raised
    lost = False  # ... and Python swallowed it: raise it again
    depth = 0  # nested `deferred()` blocks running now
    at_exit = False  # `_exiting` is registered


_state = _State()


def _handle(signum: int, _frame: object) -> None:
    s, now = _state, time.monotonic()
    if s.first_at is None:
        s.first_at, s.signum = now, signum
        if s.depth == 0:
            s.raised = True
            raise KeyboardInterrupt
        return  # held: `deferred` raises it when its block ends
    if s.depth == 0 and (s.lost or now - s.first_at >= FORCE_AFTER_S):
        s.lost = False
        raise KeyboardInterrupt
    # a second signal while the first one's stop runs: ignored, the stop goes on


def _unraisable(args: Any) -> None:
    """sys.unraisablehook: our KeyboardInterrupt raised where Python cannot propagate it (a weakref callback, a
    `__del__`) is raised again, by a signal sent to the main thread once the callback has returned."""
    s = _state
    if args.exc_type is KeyboardInterrupt and s.first_at is not None:
        s.lost = True
        again = threading.Timer(AGAIN_AFTER_S, _again, (threading.main_thread().ident,))
        again.daemon = True
        again.start()
        return
    (s.hook or sys.__unraisablehook__)(args)


def _again(main: int) -> None:
    if _state.lost and _state.previous is not None:
        signal.pthread_kill(main, _state.signum)


def install(process: bool = False) -> bool:
    """Install the handlers for SIGINT and SIGTERM (only the main thread can); whether they are ours now. Starts a
    fresh state: no signal seen. `process`: for the rest of this process (the command line), up to its exit
    (`_exiting`)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    _reset()
    if _state.previous is None:
        _state.previous = {sig: signal.signal(sig, _handle) for sig in SIGNALS}
        _state.hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    if process and not _state.at_exit:
        _state.at_exit = True
        atexit.register(_exiting)
    return True


def uninstall() -> None:
    """Put back the handlers `install` replaced, and forget the signals seen (a later command in this process starts
    afresh)."""
    previous, _state.previous = _state.previous, None
    _reset()
    if previous is not None and threading.current_thread() is threading.main_thread():
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook, _state.hook = _state.hook or sys.__unraisablehook__, None


def _reset() -> None:
    _state.first_at, _state.signum = None, signal.SIGINT
    _state.raised = _state.lost = False


def _exiting() -> None:
    """The last exit handler (the first registered): a process that is stopping ignores signals from here on. Python
    puts the default handlers back before it collects its objects, and a second SIGTERM there (SIGINT then SIGTERM
    at once) ended the process by the signal, exit code -15 instead of 130."""
    if requested():
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """The handlers installed for the block (and the previous ones put back after it); inside an `install`ed
    process, or another `handling` block, nothing changes."""
    if _state.previous is not None or not install():
        yield
        return
    try:
        yield
    finally:
        uninstall()


def requested() -> bool:
    """Whether a signal has asked this process to stop."""
    return _state.first_at is not None


def check() -> None:
    """KeyboardInterrupt if a signal has asked this process to stop (for work that must not go on after a stop
    whose KeyboardInterrupt was raised elsewhere: recording a result)."""
    if requested():
        raise KeyboardInterrupt


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A block that a first signal does not cut: one that arrives inside is raised (KeyboardInterrupt) when the
    block ends. Later signals are ignored anyway (see the module)."""
    s = _state
    s.depth += 1
    try:
        yield
    finally:
        s.depth -= 1
    if s.depth == 0 and s.first_at is not None and (not s.raised or s.lost):
        s.raised, s.lost = True, False
        raise KeyboardInterrupt
