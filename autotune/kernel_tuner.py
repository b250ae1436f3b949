"""Kernel Tuner's entry point on autotune's engine: switch a Kernel Tuner script by one import.

    import autotune.kernel_tuner as kernel_tuner        # was: import kernel_tuner
    from autotune.kernel_tuner import tune_kernel       # was: from kernel_tuner import tune_kernel

`tune_kernel` takes Kernel Tuner 1.5's arguments and returns its (results, env); what differs or is refused:
docs/kerneltuner.md and `autotune.interop.tune_kernel`. Importing this module on a machine with CuPy starts the GPU
backend in the background (`autotune.interop.kt_prewarm`).
"""

from autotune.interop import kt_prewarm

kt_prewarm.start()  # the GPU worker and compile processes start while the script prepares its data (AUTOTUNE_PREWARM=0: not)

from autotune.interop.tune_kernel import tune_kernel  # noqa: E402

__all__ = ["tune_kernel"]
