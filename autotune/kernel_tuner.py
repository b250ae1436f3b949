"""Kernel Tuner's entry point on autotune's engine: switch a Kernel Tuner script by one import.

    import autotune.kernel_tuner as kernel_tuner        # was: import kernel_tuner
    from autotune.kernel_tuner import tune_kernel       # was: from kernel_tuner import tune_kernel

`tune_kernel` takes Kernel Tuner 1.5's arguments and returns its (results, env); what differs or is refused:
docs/kerneltuner.md and `autotune.interop.tune_kernel`. `run_kernel` is Kernel Tuner's own, imported at its first
call (a script that imports it beside tune_kernel and never calls it does not pay Kernel Tuner's import). Importing
this module on a machine with CuPy starts the GPU backend in the background (`autotune.interop.kt_prewarm`).
"""

from typing import Any

from autotune.interop import kt_prewarm

kt_prewarm.start()  # the GPU worker and compile processes start while the script prepares its data (AUTOTUNE_PREWARM=0: not)

from autotune.interop.tune_kernel import tune_kernel  # noqa: E402


def run_kernel(*args: Any, **kwargs: Any) -> Any:
    """Kernel Tuner's `run_kernel` (one configuration run once, its arguments returned after the run), imported now:
    a reference computed on the GPU, as Kernel Tuner scripts do. Needs Kernel Tuner installed."""
    try:
        from kernel_tuner.interface import run_kernel as kt_run_kernel
    except ImportError as exc:
        from autotune.errors import UserError

        raise UserError(
            f"run_kernel is Kernel Tuner's own, and Kernel Tuner cannot be imported ({exc})",
            hint="pip install kernel_tuner==1.5.0, or compute the reference with NumPy",
        ) from None
    return kt_run_kernel(*args, **kwargs)


__all__ = ["run_kernel", "tune_kernel"]
