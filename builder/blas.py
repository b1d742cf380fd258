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
them, as before.

PyTorch (the companions) has kernels of its own, chosen the same way: ATen runs its AVX-512 ones on a
CPU with AVX-512, and on one with AVX-512 FP16 its float16 kernels round differently again (chapter 9's
fp16 companion ended 2.1 E from pylib's emulation on such a CPU, 1.1 E elsewhere; E is float16's own
effect). So ATEN_CPU_CAPABILITY=avx2 is set wherever the CPU has AVX2: the same kernels on every x86
machine of the last decade. COURSE_ATEN_CPU_CAPABILITY chooses others, and an empty one leaves the
choice to PyTorch.
"""

import os

MEASURED_CORE = "SkylakeX"  # the OpenBLAS core type results.json was measured with
CORE_NEEDS = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})  # its instructions
ATEN_CAPABILITY = "avx2"  # PyTorch's kernels for the companions
ATEN_NEEDS = frozenset({"avx2", "fma"})


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
    flags = cpu_flags() if flags is None else flags
    _choose(environ, "OPENBLAS_CORETYPE", MEASURED_CORE if CORE_NEEDS <= flags else None)
    _choose(environ, "ATEN_CPU_CAPABILITY", ATEN_CAPABILITY if ATEN_NEEDS <= flags else None)
    return environ.get("OPENBLAS_CORETYPE")


def _choose(environ, name, pinned):
    """Set the variable name to COURSE_<name> if that is given (an empty one unsets it), else to pinned,
    where the CPU can run it (pinned is None where it cannot: the environment's choice stands)."""
    chosen = environ.get(f"COURSE_{name}", pinned)
    if chosen:
        environ[name] = chosen
    elif chosen == "":
        environ.pop(name, None)


def setting():
    """How the kernels were chosen, as results.md states it."""
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core == MEASURED_CORE:
        text = f"OPENBLAS_CORETYPE={core} (the kernels results.json was measured with)"
    elif core:
        text = f"OPENBLAS_CORETYPE={core} (not {MEASURED_CORE}: values may differ from results.json's)"
    else:
        text = "OPENBLAS_CORETYPE unset (OpenBLAS chose its kernels: values may differ from results.json's)"
    aten = os.environ.get("ATEN_CPU_CAPABILITY")
    return text + (f"; PyTorch's ATEN_CPU_CAPABILITY={aten}" if aten else "; PyTorch's kernels as it chose them")
