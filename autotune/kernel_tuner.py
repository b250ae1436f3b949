"""Kernel Tuner's entry point on autotune's engine: switch a Kernel Tuner script by one import.

    import autotune.kernel_tuner as kernel_tuner        # was: import kernel_tuner
    from autotune.kernel_tuner import tune_kernel       # was: from kernel_tuner import tune_kernel

`tune_kernel` takes Kernel Tuner 1.5's arguments and returns its (results, env); what differs or is refused:
docs/kerneltuner.md and `autotune.interop.tune_kernel`. `run_kernel` with `lang="cupy"` runs here (Kernel
Tuner's CuPy backend's steps, `autotune.interop.kt_run`); another is Kernel Tuner's own, imported at that call (a
script that imports it beside tune_kernel and never calls it does not pay Kernel Tuner's import). Importing
this module on a machine with CuPy starts the GPU backend in the background (`autotune.interop.kt_prewarm`).
"""

from typing import Any

from autotune.interop import kt_prewarm

kt_prewarm.start()  # the GPU worker and compile processes start while the script prepares its data (AUTOTUNE_PREWARM=0: not)

from autotune.interop.tune_kernel import tune_kernel  # noqa: E402


def run_kernel(*args: Any, **kwargs: Any) -> Any:
    """Kernel Tuner's `run_kernel` (one configuration run once, its arguments returned after the run): a reference
    computed on the GPU, as Kernel Tuner scripts do. With `lang="cupy"` and plain arguments it runs here, as Kernel
    Tuner's CuPy backend does, without importing Kernel Tuner (`autotune.interop.kt_run`); any other call is Kernel
    Tuner's own, imported now (then Kernel Tuner must be installed). Either way the arguments' types are checked
    first (`autotune.interop.kt_args`): a wrong one is one error, before anything is compiled."""
    from autotune.interop import kt_run
    from autotune.interop.kt_args import bind, check_run_call

    a = bind(_kt_signature, args, kwargs, "run_kernel")
    check_run_call(a)  # wrong types: one error, before anything is compiled (either way)
    if kt_run.supported(a):
        return kt_run.run(a)
    try:
        from kernel_tuner.interface import run_kernel as kt_run_kernel
    except ImportError as exc:
        from autotune.errors import UserError

        raise UserError(
            f"run_kernel is Kernel Tuner's own, and Kernel Tuner cannot be imported ({exc})",
            hint="pip install kernel_tuner==1.5.0, or compute the reference with NumPy",
        ) from None
    return kt_run_kernel(*args, **kwargs)


def _kt_signature(
    kernel_name: Any,
    kernel_source: Any,
    problem_size: Any,
    arguments: Any,
    params: Any,
    grid_div_x: Any = None,
    grid_div_y: Any = None,
    grid_div_z: Any = None,
    lang: Any = None,
    device: Any = 0,
    platform: Any = 0,
    smem_args: Any = None,
    cmem_args: Any = None,
    texmem_args: Any = None,
    compiler: Any = None,
    compiler_options: Any = None,
    defines: Any = None,
    block_size_names: Any = None,
    quiet: Any = False,
    log: Any = None,
) -> None:
    """Kernel Tuner 1.5's `run_kernel` signature (kernel_tuner/interface.py), to read a call's arguments."""


__all__ = ["run_kernel", "tune_kernel"]
