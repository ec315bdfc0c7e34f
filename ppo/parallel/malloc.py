"""Keep freed memory in the process, so autograd's buffers are not page-faulted in each step.

A PPO update on CPU allocates and frees the same few activation and gradient buffers at
every minibatch (a 1,024 × 64 float32 activation is 256 KiB). glibc's malloc hands
blocks that large back to the operating system when they are freed (mmap/munmap, and
trimming the top of the heap), so the next step faults every page of them in again and
the kernel zeroes each one. Measured on a 2-core VM with the default network: ~330 page
faults per standalone gradient step at minibatch 1,024 (10–30 % of its time) and ~670 per
iteration of the CartPole preset's training loop; with this setting, none. (glibc raises its
mmap threshold by itself the first time it frees a mapped block, so without this setting
whether a process goes on faulting depends on the order of its first allocations: from about
1 to several hundred faults a step, run to run, on the same machine.)

`keep_freed_memory()` raises glibc's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD so those
blocks stay in the heap and are reused. The cost is memory that is not returned to the
system until the process ends (at most a few tens of MiB for these networks). On other
C libraries it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # mallopt parameter numbers, from glibc's <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's ceiling for M_MMAP_THRESHOLD on 64-bit

_applied = False


def keep_freed_memory(threshold_bytes: int = MMAP_THRESHOLD_MAX) -> bool:
    """Blocks below `threshold_bytes` come from (and return to) the heap, which is trimmed
    only above twice that. Returns True if glibc accepted both settings (once per process)."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _applied = bool(mallopt(M_MMAP_THRESHOLD, threshold_bytes)) and bool(mallopt(M_TRIM_THRESHOLD, 2 * threshold_bytes))
    return _applied
