"""builder/blas.py: the BLAS kernels that results.json was measured with, asked for only where the
CPU can run them, over the environment's core type but not over COURSE_OPENBLAS_CORETYPE."""

import os
import subprocess
import sys

from builder import blas

AVX512 = blas.CORE_NEEDS | {"sse2", "avx2", "fma"}


def test_a_cpu_with_avx512_gets_the_measured_kernels_and_one_thread():
    env = {}
    assert blas.pin(env, flags=AVX512) == blas.MEASURED_CORE
    assert env == {"OPENBLAS_NUM_THREADS": "1", "OPENBLAS_CORETYPE": blas.MEASURED_CORE,
                   "ATEN_CPU_CAPABILITY": blas.ATEN_CAPABILITY}


def test_a_cpu_without_avx512_keeps_the_environments_choice():
    for missing in sorted(blas.CORE_NEEDS):  # any one of the instructions missing is enough
        env = {}
        assert blas.pin(env, flags=AVX512 - {missing}) is None
        assert "OPENBLAS_CORETYPE" not in env and env["OPENBLAS_NUM_THREADS"] == "1"
        env = {"OPENBLAS_CORETYPE": "Haswell"}
        assert blas.pin(env, flags=AVX512 - {missing}) == "Haswell"


def test_the_environments_core_type_is_overridden_but_a_chosen_one_is_kept():
    """This machine's image sets OPENBLAS_CORETYPE=Haswell: with AVX-512 the measured kernels win.
    COURSE_OPENBLAS_CORETYPE is the deliberate choice, and an empty one leaves it to OpenBLAS."""
    env = {"OPENBLAS_CORETYPE": "Haswell"}
    assert blas.pin(env, flags=AVX512) == blas.MEASURED_CORE
    env = {"COURSE_OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_CORETYPE": "Zen", "OPENBLAS_NUM_THREADS": "2"}
    assert blas.pin(env, flags=AVX512) == "Haswell" and env["OPENBLAS_NUM_THREADS"] == "2"
    env = {"COURSE_OPENBLAS_CORETYPE": "", "OPENBLAS_CORETYPE": "Haswell"}
    assert blas.pin(env, flags=AVX512) is None and "OPENBLAS_CORETYPE" not in env


def test_pytorchs_kernels_are_avx2_wherever_the_cpu_has_it_unless_chosen():
    """ATen's AVX-512 kernels (and AVX-512 FP16's float16 ones) round differently from its AVX2 ones."""
    env = {"ATEN_CPU_CAPABILITY": "avx512"}
    blas.pin(env, flags=AVX512 | {"avx512_fp16"})
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"
    env = {}
    blas.pin(env, flags=AVX512 - {"fma"})
    assert "ATEN_CPU_CAPABILITY" not in env
    env = {"COURSE_ATEN_CPU_CAPABILITY": "avx512"}
    blas.pin(env, flags=AVX512)
    assert env["ATEN_CPU_CAPABILITY"] == "avx512"
    env = {"COURSE_ATEN_CPU_CAPABILITY": "", "ATEN_CPU_CAPABILITY": "avx512"}
    blas.pin(env, flags=AVX512)
    assert "ATEN_CPU_CAPABILITY" not in env


def test_pytorch_runs_the_pinned_kernels():
    """Imported after the pin (as conftest does), PyTorch reports AVX2 on a CPU that has it."""
    if not blas.ATEN_NEEDS <= blas.cpu_flags():
        import pytest
        pytest.skip("this CPU has no AVX2: nothing is pinned")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_ATEN_CPU_CAPABILITY", "ATEN_CPU_CAPABILITY")}
    out = subprocess.run([sys.executable, "-c", "import build, torch; print(torch.backends.cpu.get_cpu_capability())"],
                         cwd=root, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "AVX2"


def test_the_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512bw\nbogomips\t: 1\n")
    assert blas.cpu_flags(str(info)) == {"fpu", "sse2", "avx512f", "avx512bw"}
    assert blas.cpu_flags(str(tmp_path / "absent")) == frozenset()


def test_build_py_pins_before_numpy_and_openblas_uses_the_kernels():
    """Imported the way build.py does, in an environment that says Haswell (as this machine's image
    does), the pin reaches OpenBLAS: NumPy's bundled library reports the core it runs (its
    DYNAMIC_ARCH build has openblas_get_corename)."""
    script = ("import build, ctypes, glob, os, numpy\n"
              "lib = glob.glob(os.path.join(os.path.dirname(numpy.__file__), os.pardir, 'numpy.libs', '*openblas*'))\n"
              "l = ctypes.CDLL(lib[0])\n"
              "f = next(getattr(l, n) for n in ('scipy_openblas_get_corename64_', 'openblas_get_corename') if hasattr(l, n))\n"
              "f.restype = ctypes.c_char_p\n"
              "print(os.environ.get('OPENBLAS_CORETYPE'), f().decode())\n")
    env = {k: v for k, v in os.environ.items() if k != "COURSE_OPENBLAS_CORETYPE"}
    env["OPENBLAS_CORETYPE"] = "Haswell"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True, check=True)
    pinned, core = out.stdout.split()
    if blas.CORE_NEEDS <= blas.cpu_flags():
        assert pinned == blas.MEASURED_CORE and core.lower() == blas.MEASURED_CORE.lower()
    else:
        assert pinned == "Haswell" and core.lower() == "haswell"


def test_chapter_1s_default_run_reproduces_results_json_bit_for_bit(shared_corpus):
    """The point of the pin, on whatever machine runs the tests: seed 0's default run (the run
    chapter 1 quotes, TrainConfig(final_eval=True)) ends at exactly results.json's validation loss.
    It did not on this machine's own kernels (2.4953117927464072 against 2.4953121829791023)."""
    import dataclasses
    import json
    import pathlib

    import pytest

    from experiments.common import final_val
    from pylib import model, train

    if os.environ.get("OPENBLAS_CORETYPE") != blas.MEASURED_CORE:
        pytest.skip(f"not on the measured kernels here ({blas.setting()}): results.json's last bits are not expected")
    results = json.loads((pathlib.Path(__file__).resolve().parent.parent / "results.json").read_text())
    cfg = dataclasses.replace(train.TrainConfig(), final_eval=True, seed=0)
    _, history = train.train(model.GPTConfig(), cfg, shared_corpus.train, shared_corpus.val)
    assert final_val(history) == results["values"]["ch1.default.final_val.per_seed"]["0"]
