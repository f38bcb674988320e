"""The course's one measurement library, shared by the grader, the benchmark suite and the notebooks.

- ``measure.timer``: the timer protocol (warm-up, L2 cold, every stream waited for, interleaved
  repetitions, medians less an empty call's) and the in-process CUDA-event clock; the grader brings a
  clock of its own that runs outside the learner's process (``autograder.timing``); the notebooks time
  with ``bench`` and ``bench_interleaved`` (the protocol, repetitions sized for the machine).
- ``measure.tolerance``: the tolerance table per dtype and the float64 comparison that uses it.
- ``measure.memory``: peak bytes of one call and what it leaves allocated (the CUDA allocator on a GPU, the
  profiler on the CPU); ``MemoryMeter``, the bytes torch operators return, alive and at peak (deterministic).
- ``measure.memory_timeline``: every allocation of a call as a stacked timeline (CUDA allocator history or
  the memory events of the profiler's exported trace).
- ``measure.launches``: which profiler events launch no kernel (one list for notebook 02 and the grader).
- ``measure.reference``: float64 definitions of the course's operations (GELU, softmax, LayerNorm,
  attention) and shared constants (``LOG2E``).
- ``measure.ceilings``: this machine's roofs (copy bandwidth, matmul rate), measured and cached.
- ``measure.roofline``: the roofline plot of the learner's kernels on those roofs.
- ``measure.files``: atomic JSON writes and the environment a result file records.

Nothing here imports the learner's code or the grader: it is safe to use in any process.
"""
