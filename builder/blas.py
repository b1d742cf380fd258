"""Which BLAS kernels NumPy uses, fixed before NumPy is first imported.

NumPy's OpenBLAS picks its kernels for the CPU it finds (its DYNAMIC_ARCH build), and kernels for
different CPUs round differently. A 1,000-step run amplifies that: chapter 1's default run, seed 0,
ends at validation loss 2.4953121829791023 with the SkylakeX kernels and 2.4953117927464072 with the
Haswell or Zen ones, and seed 1 differs in the second decimal. So the same code and seeds gave a
different results.json on each machine. results.json was measured with SkylakeX's kernels, so
build.py and the tests ask for them (OPENBLAS_CORETYPE) wherever the CPU can run them (AVX-512), and
results.md records the setting. On a CPU without AVX-512 nothing is pinned, and a re-measurement
may differ from results.json in the last bits, and its chaotic runs by more.

Only the kernels are fixed: one thread (OPENBLAS_NUM_THREADS=1) fixes the order of each sum within
them, as before. PyTorch has its own kernels and is not affected.
"""

import os

MEASURED_CORE = "SkylakeX"  # the OpenBLAS core type results.json was measured with
CORE_NEEDS = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})  # its instructions


def cpu_flags(cpuinfo="/proc/cpuinfo"):
    """The CPU's feature flags (Linux), or an empty set where they cannot be read."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def pin(environ=os.environ, flags=None):
    """Set one BLAS thread, unless the caller chose a count, and the measured kernels where the CPU
    has AVX-512. The kernels override an OPENBLAS_CORETYPE already in the environment (this machine's
    image sets Haswell, and that is what made its numbers differ); COURSE_OPENBLAS_CORETYPE chooses
    others on purpose, and an empty one leaves the choice to OpenBLAS. Must run before NumPy is
    imported; returns the core type now in force, or None."""
    environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    chosen = environ.get("COURSE_OPENBLAS_CORETYPE")
    if chosen is None and CORE_NEEDS <= (cpu_flags() if flags is None else flags):
        chosen = MEASURED_CORE
    if chosen:
        environ["OPENBLAS_CORETYPE"] = chosen
    elif chosen == "":
        environ.pop("OPENBLAS_CORETYPE", None)
    return environ.get("OPENBLAS_CORETYPE")


def setting():
    """How the kernels were chosen, as results.md states it."""
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core == MEASURED_CORE:
        return f"OPENBLAS_CORETYPE={core} (the kernels results.json was measured with)"
    if core:
        return f"OPENBLAS_CORETYPE={core} (not {MEASURED_CORE}: values may differ from results.json's)"
    return "OPENBLAS_CORETYPE unset (OpenBLAS chose its kernels: values may differ from results.json's)"
