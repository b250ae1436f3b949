"""A stand-in for `autotune.sweep.backends.gpu_entry.gpu_main` where there is no GPU (tests/test_faults.py).

It speaks the real worker's pipe protocol (("ready", None) at start; device_info, measure, baseline and
stop requests; ("progress", est) and ("result" | "fatal", payload) answers), so the parent's supervision
in `GpuBackend` (`_spawn`, `_call`, the watchdog, `_kill`, restarts) runs unchanged. Every measure and
baseline request is appended to `trace` as `pid kind instance_id point_key action`; the n-th measure
request of the whole run (counted in `trace`, so across replaced workers) misbehaves as `faults[n]` says:

- `die`: the process exits with code 9 before answering (a kernel that takes the process down); its pipe
  closes 0.2 s before it exits, as (for a shorter moment) in any process that dies;
- `hang`: it never answers (a kernel that never returns);
- `fatal`: it reports a CUDA error that poisons its context and exits, like the real worker;
- `slow` (or `slow:SECONDS`): it reports the verified launch's time (est 10 ms) at once, then answers after 1.5 s
  (or SECONDS).
Any other request is answered at once: measurements `ok` at 1 ms, the baseline at 2 ms.
"""

from __future__ import annotations

import os
import time
from typing import Any

from autotune.vocab import DeviceInfo, Measurement, Status

INFO = DeviceInfo(
    name="Fake GPU",
    uuid="GPU-fake-0001",
    sm_count=132,
    cc=90,
    sm_clock_mhz=1980,
    mem_clock_mhz=2619,
    l2_bytes=50 * 2**20,
    copy_bandwidth=3e12,
    driver="0",
    cuda_runtime="0",
    nvrtc="0",
    cupy="0",
)
CUDA_FAULT = "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"


def fake_gpu_main(conn: Any, device: int, *, faults: dict[int, str], trace: str) -> None:
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        kind = message[0]
        if kind == "stop":
            return
        if kind == "device_info":
            conn.send(("result", INFO))
            continue
        if kind == "measure":
            ident, point = message[1].instance_id, message[1].variant.point
        else:  # ("baseline", problem, point, scalars, reps)
            ident, point = message[1].baseline_name or "baseline", message[2]
        with open(trace, "a+") as f:
            f.seek(0)
            n = sum(1 for line in f if line.split()[1] == "measure") + 1
            action = faults.get(n, "ok") if kind == "measure" else "ok"
            f.write(f"{os.getpid()} {kind} {ident} {point.key} {action}\n")
        if action == "die":  # a dying process's pipe closes a moment before it can be reaped: widen that moment
            conn.close()
            time.sleep(0.2)
            os._exit(9)
        if action == "hang":
            while True:
                time.sleep(60)
        if action == "fatal":
            conn.send(("fatal", Measurement(ident, point, Status.LAUNCH_ERROR, error=CUDA_FAULT)))
            conn.close()
            os._exit(3)
        if action.startswith("slow"):
            conn.send(("progress", 10.0))
            time.sleep(float(action.partition(":")[2] or 1.5))
        ms = 1.0 if kind == "measure" else 2.0
        conn.send(
            (
                "result",
                Measurement(
                    ident,
                    point,
                    Status.OK,
                    median_ms=ms,
                    p20_ms=ms,
                    p80_ms=ms,
                    min_ms=ms,
                    max_ms=ms,
                    reps=3,
                    times_ms=[ms] * 3,
                    max_rel_err=0.0,
                    l2_protection="none",
                ),
            )
        )
