"""The compile machinery of a sweep: NVRTC (`nvrtc`: many instances per call, cached on disk) and the toolkit's
nvcc (`nvcc`), the compile processes (`compile_pool`) and how they are started (`spawning`: the standard library
only), each distinct program compiled once at a time (`twins`), and a space stopped early on a systematic failure
(`failstop`). Nothing is imported here: `spawning` is imported at `autotune.kernel_tuner`'s start."""
