"""The SIMT simulator and everything that reads its trace.

Kernels run on CPU as a GPU runs them: `simulator` schedules the simulated threads of a block
(Numba's CUDA simulator underneath, with CUDA's thread order and barriers), `memtrace` records
each thread's memory accesses around the kernel, and `memmodel` groups the record into warp
requests as the hardware issues them (sectors, bank conflicts, barriers). This package is the
grader's own code in the kernel worker: it sits above `grader.core` and below `grader.sandbox`.
"""
