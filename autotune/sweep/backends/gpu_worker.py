"""The GPU worker process: loads compiled kernels, verifies and times them, reports back over a pipe.

Its entry is `gpu_entry.gpu_main` (a light module, spawned before the rest of the engine is imported). It runs in a
child process started by `autotune.sweep.backends.local.GpuBackend` (spawn), so a kernel that faults,
hangs or exhausts memory takes down only this process; the parent records the failure and starts a
new one. It keeps loaded modules, problem data (built by each point's problem kind) and references between requests.
A point's constants (`ProblemData.constants`: a declared kind's `constants:`) are copied into the loaded module's
`__constant__` symbols before an instance of that module runs on that point's data, once per (module, data).
"""

from __future__ import annotations

import itertools
import time
import traceback
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Mapping

from autotune.sweep.timing import TimingPlan
from autotune.sweep.compile.nvrtc import CompiledKernel
from autotune.problems.base import ProblemKind, Scalars, l2_protection, scalars_key
from autotune.problems.declared_data import CheckError
from autotune.vocab import TIME_STATS, DeviceInfo, Measurement, Status, TestPoint

if TYPE_CHECKING:  # pragma: no cover
    from autotune.sweep.backends.tasks import MeasureRequest


def warm_comparisons(cp: Any) -> None:
    """Compile the device comparison tune_kernel's generated check uses on float32 and float64 outputs
    (`device_compare`: one header-free NVRTC compile each, in a thread; NVRTC only, no GPU work, so it may run while
    kernels are timed) while the worker waits for its first request (a Kernel Tuner script still preparing its
    data). It replaced CuPy's `allclose`, whose JIT kernels took 4.4 s to compile from a fresh kernel cache while
    the compile pool held every core (the first measurement waited for them). Failures are ignored: the check
    compiles what it needs itself, or compares on the host."""
    try:
        from autotune.sweep.backends.device_compare import start_compiles

        start_compiles()
    except Exception:  # noqa: BLE001 - only a head start
        pass


class ProblemFault(Exception):
    """The problem's own code failed, whatever instance ran: its reference raised or returned what the problem's
    outputs cannot hold, its buffers could not be made, its check raised, or the compiled source has no kernel (or
    no `__constant__` symbol) of the declared name.
    Not data about an instance: the parent stops the sweep with this message and records nothing for the pair."""


class GpuState:
    def __init__(self, cp: Any, device: int) -> None:
        from autotune.sweep.timing import Timer

        self.cp, self.device = cp, device
        self.info: DeviceInfo | None = None  # described once, right after the start (gpu_main)
        self.stamps: dict[str, float] = {}  # start-up steps after "ready", sent with the first `prepare` answer
        self.props = cp.cuda.runtime.getDeviceProperties(device)
        self.l2_bytes = int(self.props["l2CacheSize"])
        self.timer = Timer()
        self.kernels = LoadedKernels()
        self.data: OrderedDict[tuple, Any] = OrderedDict()  # (point, convention, scalars_key) -> [data, cursor, args]
        self.refs: OrderedDict[tuple, Any] = OrderedDict()
        self.serials: dict[tuple, int] = {}  # data key -> which allocation of it (constants are per allocation)
        self._serial = itertools.count()
        self.constants_in: dict[str, tuple[tuple, int]] = {}  # blob -> the data whose constants its module holds
        free, total = cp.cuda.runtime.memGetInfo()
        self.budget = int(0.4 * total)  # problem data and references of recently used points

    def handle(self, message: tuple, conn: Any) -> tuple[Any, bool]:
        kind = message[0]
        if kind == "device_info":
            if self.info is None:
                self.info = self.device_info()
            return self.info, False
        if kind == "prepare":
            return self.prepare(*message[1:])
        if kind == "device_limits":  # the planning limits, read here: the parent then needs no CuPy of its own
            from autotune.devices import read_gpu

            return read_gpu(self.device), False
        point = message[1].variant.point if kind == "measure" else message[2]
        ident = message[1].instance_id if kind == "measure" else (message[1].baseline_name or "baseline")
        cp = self.cp
        for attempt in (0, 1):
            try:
                if kind == "measure":
                    return self.measure(message[1], conn), False
                _, problem, at, scalars, reps = message
                return self.baseline(problem, at, scalars, reps, conn), False
            except ProblemFault as exc:
                self.drop_caches()
                return exc, False
            except cp.cuda.memory.OutOfMemoryError as exc:
                self.drop_caches()
                if attempt:
                    return Measurement(
                        ident,
                        point,
                        Status.LAUNCH_ERROR,
                        error=f"out of memory: {exc}"[:300],
                        log=traceback.format_exc(),
                    ), False
            except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as exc:
                return Measurement(
                    ident, point, Status.LAUNCH_ERROR, error=str(exc)[:300], log=traceback.format_exc()
                ), True
            except Exception as exc:  # noqa: BLE001 - unknown state: report and let the parent replace us
                return Measurement(
                    ident, point, Status.CRASHED, error=f"{type(exc).__name__}: {exc}"[:300], log=traceback.format_exc()
                ), True
        raise AssertionError("unreachable")

    def prepare(self, kind: ProblemKind, point: TestPoint, convention: str, scalars: Scalars) -> tuple[Any, bool]:
        """Build a point's data and reference before its first instance has compiled (the parent asks while its
        compile pool works), so the first measurement does not wait for them. (stamps | ProblemFault, fatal):
        the stamps (time.monotonic) of its steps, for the parent's start-up timeline."""
        cp = self.cp
        stamps, self.stamps = self.stamps, {}
        try:
            key, _ = self.problem(kind, point, convention, scalars)
            stamps["prepare_data"] = time.monotonic()
            self.reference(key)
            stamps["prepare_reference"] = time.monotonic()
            self.warm_verify(key)
            stamps["prepare_warm"] = time.monotonic()
        except ProblemFault as exc:
            self.drop_caches()
            return exc, False
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError):
            return None, True  # the context may be poisoned: the parent starts a new worker
        except Exception:  # noqa: BLE001 - out of memory and the like: the measurement that needs it reports it
            self.drop_caches()
        return stamps, False

    def warm_verify(self, key: tuple) -> None:
        """Run the point's verification once now, on its outputs as `prepare_verify` leaves them (the verdict is
        thrown away): CuPy compiles the kernels it uses (the outputs' fill, the comparison) at their first use, and
        from a fresh kernel cache that was at the first measurement, behind the compile pool that holds every core
        (a convolution's first measurement came 5.3 s after its first compiled instance on an H100 host). A check
        function (`check:`) runs only through its module's `warm(outputs)`, where it has one (tune_kernel's
        generated check: its comparison on the device); a failure here is left to the measurement that meets it."""
        data = self.data[key][0]
        try:
            data.prepare_verify()
            spec = getattr(getattr(data, "kind", None), "check_fn", None)
            if spec is None:
                data.verify_instance(self.refs.get(key), {})
                return
            from autotune.problems.declared_data import HostArrays
            from autotune.problems.loading import load_attribute

            warm = load_attribute(f"{spec.rsplit(':', 1)[0]}:warm")
            if callable(warm):
                warm(HostArrays({**data.sets[0], **data.scalars, **data.host_constants}))
        except (self.cp.cuda.driver.CUDADriverError, self.cp.cuda.runtime.CUDARuntimeError):
            raise  # the context may be poisoned: `prepare` has the parent start a new worker
        except Exception:  # noqa: BLE001 - only a head start (no warm(), a check that needs a run's outputs)
            pass

    def drop_caches(self) -> None:
        self.data.clear()
        self.refs.clear()
        self.serials.clear()
        self.cp.get_default_memory_pool().free_all_blocks()

    def problem(self, kind: ProblemKind, point: TestPoint, convention: str, scalars: Scalars) -> tuple[tuple, list]:
        """(cache key, [ProblemData, rotation cursor, {copy: args}]) of a point with the run's scalars (the kind's
        defaults overridden by `scalars`), built by its kind on first use."""
        full = kind.scalars(scalars)
        key = (point, convention, scalars_key(full))
        if key not in self.data:
            try:
                data = kind.allocate(point, convention, full, self.l2_bytes, seed=zlib.crc32(repr(key[:2]).encode()))
            except self.cp.cuda.memory.OutOfMemoryError as exc:
                if self.data:
                    raise  # the caches hold memory: dropped and tried once more by `handle`
                raise ProblemFault(
                    f"the {kind.name} problem's buffers at {point.key} do not fit in the GPU's free memory: {exc}"[:400]
                ) from None
            except Exception as exc:  # noqa: BLE001 - the kind's own code: reported as the problem's fault
                raise ProblemFault(
                    f"the {kind.name} problem's buffers could not be made at {point.key}: {type(exc).__name__}: {exc}"[
                        :400
                    ]
                ) from None
            self.data[key] = [data, 0, {}]
            self.serials[key] = next(self._serial)
            self._evict(keep=key)
        self.data.move_to_end(key)
        return key, self.data[key]

    def _bytes(self) -> int:
        return sum(e[0].nbytes() for e in self.data.values()) + sum(_nbytes(ref) for ref in self.refs.values())

    def _evict(self, keep: tuple) -> None:
        """Drop the least recently used points' data and references (never `keep`'s) while over budget."""
        while self._bytes() > self.budget:
            old = next((k for k in self.data if k != keep), None)
            if old is None:
                return
            del self.data[old]
            self.refs.pop(old, None)
            self.serials.pop(old, None)

    def reference(self, key: tuple) -> Any:
        if key not in self.refs:
            data = self.data[key][0]
            try:
                self.refs[key] = data.reference()
            except self.cp.cuda.memory.OutOfMemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - the user's reference: reported as the problem's fault
                name = getattr(getattr(data, "kind", None), "reference_fn", None) or "the reference"
                raise ProblemFault(f"{name} failed at {key[0].key}: {type(exc).__name__}: {exc}"[:400]) from None
            self._evict(keep=key)
        self.refs.move_to_end(key)
        return self.refs[key]

    def _launcher(self, entry: list, kernel: Callable[[tuple], None]) -> Callable[[int], None]:
        """launch(r) runs on the next data copy in a rotation shared by all instances of this point."""
        data, _, args = entry

        def launch(r: int) -> None:
            copy = entry[1] % data.copies
            entry[1] += 1
            if copy not in args:
                args[copy] = data.args(copy)
            kernel(args[copy])

        return launch

    def _verified_time(self, key: tuple, run_copy0: Callable[[], None], params: Mapping[str, Any]) -> tuple[float, Any]:
        ref = self.reference(key)
        data = self.data[key][0]
        data.prepare_verify()
        est = self.timer.time_once(run_copy0)
        try:
            return est, data.verify_instance(ref, params)
        except CheckError as exc:  # the user's check raised: the problem's fault, whatever the instance
            raise ProblemFault(str(exc)[:400]) from None

    def set_constants(self, blob: str, key: tuple, data: Any) -> None:
        """Copy the point's constants into the module of `blob` (its `__constant__` symbols), unless that module
        holds this allocation's already. A symbol the module lacks is the problem's fault."""
        constants = data.constants()
        stamp = (key, self.serials.get(key, -1))
        if not constants or self.constants_in.get(blob) == stamp:
            return
        module = self.kernels.modules[blob]
        for name, host in constants.items():
            try:
                ptr, size = global_symbol(module, name)
            except self.cp.cuda.driver.CUDADriverError as exc:
                if "NOT_FOUND" not in str(exc):
                    raise
                raise ProblemFault(
                    f"the compiled kernel has no __constant__ symbol {name!r} (problem: constants:); "
                    f"declare `__constant__ ... {name}[...]` at file scope, outside any namespace, "
                    f"and use it in the kernel ({exc})"
                ) from None
            if size is not None and host.nbytes > size:
                raise ProblemFault(
                    f"constant {name!r} holds {host.nbytes:,} bytes; the kernel's __constant__ symbol "
                    f"{name} has {size:,} (problem: constants: shape and dtype)"
                )
            self.cp.cuda.runtime.memcpy(ptr, host.ctypes.data, host.nbytes, 1)  # 1: cudaMemcpyHostToDevice
        self.constants_in[blob] = stamp

    def measure(self, req: MeasureRequest, conn: Any) -> Measurement:
        cp, v = self.cp, req.variant
        m = Measurement(req.instance_id, v.point, Status.OK, compile_s=req.compile_s)
        try:
            func = self.kernels.function(req.blob, req.lowered_name)
        except cp.cuda.driver.CUDADriverError as exc:
            if "NOT_FOUND" not in str(exc):
                raise
            raise ProblemFault(f"the compiled source has no kernel named {req.lowered_name!r} ({exc})") from None
        attr = cp.cuda.driver.funcGetAttribute
        m.registers, m.shared_bytes, m.local_bytes = (int(attr(a, func.ptr)) for a in (4, 1, 3))
        m.shared_bytes += v.shared_bytes
        threads, max_threads = v.block[0] * v.block[1] * v.block[2], int(attr(0, func.ptr))
        if threads > max_threads:
            m.status, m.error = (
                Status.LAUNCH_ERROR,
                (
                    f"resource limit: block of {threads} threads > {max_threads} this function allows "
                    f"({m.registers} registers per thread)"
                ),
            )
            return m
        allow_dynamic_shared(func, v.shared_bytes)
        key, entry = self.problem(req.kind, v.point, req.convention, req.scalars)
        self.set_constants(req.blob, key, entry[0])

        def kernel(args: tuple) -> None:
            func(v.grid, v.block, args, shared_mem=v.shared_bytes)

        est, verdict = self._verified_time(key, lambda: kernel(entry[0].args(0)), req.params)
        m.max_rel_err = verdict.max_rel_err
        if not verdict.ok:
            m.status, m.error = Status.WRONG, verdict.message
            return m
        conn.send(("progress", est))
        return self._timed(m, entry, self._launcher(entry, kernel), est, req.plan, l2_protection(entry[0].copies))

    def _timed(
        self, m: Measurement, entry: list, launch: Callable[[int], None], est: float, plan: TimingPlan, protection: str
    ) -> Measurement:
        from autotune.sweep.timing import summarize

        times, stopped = self.timer.measure(launch, est, plan)
        s = summarize(times)
        m.status = Status.SKIPPED if stopped else Status.OK
        for name in TIME_STATS:
            setattr(m, name, getattr(s, name))
        m.reps, m.times_ms, m.l2_protection = s.reps, times, protection
        return m

    def baseline(self, kind: ProblemKind, point: TestPoint, scalars: Scalars, reps: int, conn: Any) -> Measurement:
        """The kind's baseline on the same data as the kernels, verified and timed like a kernel."""
        key, entry = self.problem(kind, point, kind.conventions[0], scalars)
        m = Measurement(kind.baseline_name or "baseline", point, Status.OK)
        launch = entry[0].baseline()
        if launch is None:
            m.status, m.error = Status.SKIPPED, f"the {kind.name} kind has no baseline"
            return m
        est, verdict = self._verified_time(key, lambda: launch(0), {})
        m.max_rel_err = verdict.max_rel_err
        if not verdict.ok:
            m.status, m.error = Status.WRONG, verdict.message
            return m
        conn.send(("progress", est))

        def rotating(r: int) -> None:
            entry[1] += 1
            launch(entry[1])

        return self._timed(m, entry, rotating, est, TimingPlan(reps), l2_protection(entry[0].copies))

    def device_info(self) -> DeviceInfo:
        from autotune.sweep.timing import read_device_info

        return read_device_info(self.device, self.props, self.stamps)


def global_symbol(module: Any, name: str) -> tuple[int, int | None]:
    """(device address, size in bytes when CuPy tells it) of a module-scope symbol (`__constant__`/`__device__`)
    of a loaded CuPy module. CuPy 14's `Module.get_global_var` (the driver's cuModuleGetGlobal) returns the address
    as an int (tests/gpu/test_user_vocab_gpu.py); a MemoryPointer (address and size) is taken too. The low-level
    Module used here has no `get_global` (RawModule's wrapper), which failed on an H100."""
    got = module.get_global_var(name)
    if hasattr(got, "ptr"):
        return int(got.ptr), int(got.mem.size)
    return int(got), None


class LoadedKernels:
    """Compiled kernels loaded into the current CUDA context (CuPy), one module per blob.
    `get_function(name_expression)` serves the kernels given at construction (`compile.compile_all`)."""

    def __init__(self, kernels: Mapping[str, CompiledKernel] | None = None) -> None:
        self.kernels = dict(kernels or {})
        self.modules: dict[str, Any] = {}

    def function(self, blob: str, lowered_name: str) -> Any:
        if blob not in self.modules:
            import cupy as cp

            mod = cp.cuda.function.Module()
            mod.load_file(blob)
            self.modules[blob] = mod
        return self.modules[blob].get_function(lowered_name)

    def get_function(self, name_expression: str) -> Any:
        ck = self.kernels[name_expression]
        if not ck.ok or ck.lowered_name is None:
            raise RuntimeError(f"{name_expression} did not compile: {ck.log[-2000:]}")
        return self.function(str(ck.blob), ck.lowered_name)


def allow_dynamic_shared(func: Any, shared_bytes: int) -> None:
    """Opt a kernel in to more than 48 KB of dynamic shared memory (driver API); nothing below that."""
    if shared_bytes > 48 * 1024:
        import cupy as cp

        drv = cp.cuda.driver
        drv.funcSetAttribute(func.ptr, getattr(drv, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8), shared_bytes)


def _nbytes(value: Any) -> int:
    """Device bytes of a reference: arrays, or lists/tuples/dicts of them."""
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))
