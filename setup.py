"""Build lutcore's native extensions.

Design: every hot kernel lives in a C header under include/lutcore/ and is
wrapped by a thin Cython module under lutcore/_native/.  AVX2 bodies are
compiled with per-function ``target`` attributes inside those headers; bodies
for wider ISAs live in their own translation units under src/<family>/, each
compiled alone with its ISA's flags into a static library (``X86_BODIES``)
that every extension links, and chosen at run time from the CPU's features —
so one binary runs on any x86-64 (and the portable C bodies run everywhere
else).  The same AVX-512 sources can be compiled once more against SIMDe (the
headers of the ``simde-py`` package, in the test extra) with AVX2+FMA flags into
the test-only extensions lutcore._native._simde (gemm), _simde_ew (element-wise),
_simde_mamba (math functions, conv1d, selective scan), _simde_optim (AdamW), _simde_sgemm,
_simde_decode (norms, decode attention, the decode layer) and _simde_gt (the
gradient-table pass), which run them on
any x86-64.  A normal build (``pip install .``, a wheel, an editable install) never
builds them and needs no SIMDe; ``LUTCORE_SIMDE_TWINS=1`` builds ONLY them (and the
body libraries they link), which is what the test suite does on first use
(tests/simde_twins.py, into a cache outside the package).  The build is never tuned to the
build machine's CPU and never relaxes IEEE semantics; -ffp-contract=off keeps
float results identical across paths.

OpenMP is used when the compiler supports it; LUTCORE_NO_OPENMP=1 forces a
serial build; ``lutcore.show_config()`` reports which one you got.  The libraries and
the extensions compile in parallel, one job per CPU (LUTCORE_BUILD_JOBS=N sets the count).
"""
import glob
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_clib import build_clib
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _compiler_accepts_openmp():
    if os.environ.get("LUTCORE_NO_OPENMP", "0") not in ("", "0"):
        return False, "disabled by LUTCORE_NO_OPENMP"
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc = cc.split()
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        flags = ["-fopenmp"]
        if sys.platform == "darwin":
            flags = ["-Xpreprocessor", "-fopenmp", "-lomp"]
        cmd = cc + flags + [src, "-o", os.path.join(tmp, "t")]
        extra = os.environ.get("CFLAGS", "").split() + os.environ.get("LDFLAGS", "").split()
        r = subprocess.run(cmd + extra, capture_output=True)
        return r.returncode == 0, ("" if r.returncode == 0 else r.stderr.decode(errors="replace")[-300:])
    except OSError as e:
        return False, str(e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


HAVE_OMP, why = _compiler_accepts_openmp()
if not HAVE_OMP:
    print(f"lutcore: building WITHOUT OpenMP (serial kernels): {why}", file=sys.stderr)

# No debug info unless LUTCORE_DEBUG_INFO=1 (Python's own CFLAGS carry -g: it makes the wheel
# ~4x larger and the build longer; users' tracebacks do not need it).
DEBUG_INFO = os.environ.get("LUTCORE_DEBUG_INFO", "0") not in ("", "0")
G_FLAGS = [] if DEBUG_INFO else ["-g0"]
cflags = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-std=c11", "-Wno-unused-function"] + G_FLAGS
if sys.platform == "win32":
    cflags = ["/O2", "/fp:precise"]
ldflags = []
if HAVE_OMP:
    if sys.platform == "darwin":
        cflags += ["-Xpreprocessor", "-fopenmp"]
        ldflags += ["-lomp"]
    elif sys.platform == "win32":
        cflags += ["/openmp"]
    else:
        cflags += ["-fopenmp"]
        ldflags += ["-fopenmp"]

macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("LUTCORE_HAVE_OPENMP", "1" if HAVE_OMP else "0")]

# Per-ISA translation units: (library, sources, ISA flags).  Objects are rebuilt when
# any header under include/ or src/ changes (setuptools' build_clib compares times).
IS_X86 = platform.machine().lower() in ("x86_64", "amd64", "x86-64") and sys.platform != "win32"
AVX512_FLAGS = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma", "-mf16c", "-mbmi2"]
AVX2_FLAGS = ["-mavx2", "-mfma", "-mf16c", "-mbmi2"]
X86_BODIES = [
    ("lutcore_avx512", ["src/gemm/avx512.c"], AVX512_FLAGS),
    ("lutcore_avx512vnni", ["src/gemm/avx512_vnni.c"], AVX512_FLAGS + ["-mavx512vnni"]),
    ("lutcore_avx512vbmi", ["src/gemm/avx512_vbmi.c"], AVX512_FLAGS + ["-mavx512vbmi", "-mavx512vnni"]),
    ("lutcore_sgemm_avx512", ["src/sgemm/sgemm_avx512.c"], AVX512_FLAGS),
]
SIMDE_BODIES = ("lutcore_simde", ["src/gemm/simde_avx512.c", "src/gemm/simde_avx512_vnni.c",
                                  "src/gemm/simde_avx512_vbmi.c", "src/sgemm/simde_sgemm_avx512.c"], AVX2_FLAGS)
# the element-wise family (src/elementwise/): AVX-512 F/BW, and + VBMI for relu8's byte permutes
X86_BODIES += [("lutcore_ew_avx512", ["src/elementwise/avx512.c"], AVX512_FLAGS),
               ("lutcore_ew_avx512vbmi", ["src/elementwise/avx512_vbmi.c"], AVX512_FLAGS + ["-mavx512vbmi"])]
SIMDE_BODIES[1].extend(["src/elementwise/simde_avx512.c", "src/elementwise/simde_avx512_vbmi.c"])
# the math functions (src/mathfn/): AVX-512 F/DQ
X86_BODIES += [("lutcore_mathfn_avx512", ["src/mathfn/avx512.c"], AVX512_FLAGS)]
SIMDE_BODIES[1].append("src/mathfn/simde_avx512.c")
# AdamW (src/optim/): AVX-512 F/DQ
X86_BODIES += [("lutcore_optim_avx512", ["src/optim/avx512.c"], AVX512_FLAGS)]
SIMDE_BODIES[1].append("src/optim/simde_avx512.c")
# causal conv1d (src/conv/): conv.h's loops compiled with the AVX-512 flags
X86_BODIES += [("lutcore_conv_avx512", ["src/conv/avx512.c"], AVX512_FLAGS)]
SIMDE_BODIES[1].append("src/conv/simde_avx512.c")
# the selective scan (src/scan/): scan_impl.h at 16 lanes, AVX-512 F/DQ
X86_BODIES += [("lutcore_scan_avx512", ["src/scan/avx512.c"], AVX512_FLAGS)]
SIMDE_BODIES[1].append("src/scan/simde_avx512.c")
# the norms (src/norm/, one source body.h): AVX2 (8 rows a vector) and AVX-512 (16)
X86_BODIES += [("lutcore_norm_avx2", ["src/norm/avx2.c"], AVX2_FLAGS),
               ("lutcore_norm_avx512", ["src/norm/avx512.c"], AVX512_FLAGS)]
SIMDE_BODIES[1].append("src/norm/simde_avx512.c")
# decode attention (src/attn/): AVX-512 F
X86_BODIES += [("lutcore_attn_avx512", ["src/attn/avx512.c"], AVX512_FLAGS)]
SIMDE_BODIES[1].append("src/attn/simde_avx512.c")
# the gradient-table pass (src/gradtables/): AVX2 (8-lane gathers) and AVX-512 (16)
X86_BODIES += [("lutcore_gt_avx2", ["src/gradtables/avx2.c"], AVX2_FLAGS),
               ("lutcore_gt_avx512", ["src/gradtables/avx512.c"], AVX512_FLAGS)]
SIMDE_BODIES[1].append("src/gradtables/simde_avx512.c")
libraries = []
# Every extension is rebuilt when a header or a body source changes (it links the bodies' libraries).
deps = sorted(glob.glob(os.path.join("include", "lutcore", "**", "*.h"), recursive=True)
              + glob.glob(os.path.join("src", "**", "*.[ch]"), recursive=True))
# LUTCORE_SIMDE_TWINS=1: build only the SIMDe test twins (tests/simde_twins.py sets it).
SIMDE_TWINS = os.environ.get("LUTCORE_SIMDE_TWINS", "0") not in ("", "0")
if SIMDE_TWINS and not IS_X86:
    sys.exit("lutcore: LUTCORE_SIMDE_TWINS=1: the SIMDe twins are built on x86-64 (not Windows) only")
simde_include = None
if IS_X86:
    if SIMDE_TWINS:
        try:
            import simde_py
        except ImportError:
            sys.exit("lutcore: LUTCORE_SIMDE_TWINS=1 needs the simde-py package (pip install simde-py, "
                     "or pip install -e \".[test]\")")
        simde_include = [simde_py.get_include()]
    body_cflags = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-std=c11", "-Wno-unused-function",
                   "-Wno-psabi"] + G_FLAGS
    for name, sources, flags in X86_BODIES + ([SIMDE_BODIES] if simde_include else []):
        libraries.append((name, {"sources": sources, "include_dirs": ["include", "src"] + (simde_include or []),
                                 "cflags": body_cflags + flags, "obj_deps": {"": deps}}))
    macros.append(("LC_HAVE_X86_BODIES", "1"))

MODULES = ["_cpu", "gemm", "elementwise", "mamba", "optim", "sgemm", "decode", "alloc", "im2col", "gradtables"]
# Test-only extensions: a family's wrappers (_simde*.pyx include the family's .pyx) linked with
# the SIMDe copies of its AVX-512 bodies, selected by the macros.
SIMDE_MODULES = [
    ("_simde", [("LC_GEMM_SIMDE", "1")]),                                  # gemm
    ("_simde_ew", [("LC_EW_SIMDE", "1")]),                                 # element-wise
    ("_simde_mamba", [("LC_MATHFN_SIMDE", "1"), ("LC_CONV_SIMDE", "1"),   # math functions, conv1d,
                      ("LC_SCAN_SIMDE", "1")]),                              # selective scan
    ("_simde_optim", [("LC_OPTIM_SIMDE", "1")]),                           # AdamW
    ("_simde_sgemm", [("LC_SGEMM_SIMDE", "1")]),                           # sgemm (ops.matmul)
    ("_simde_decode", [("LC_NORM_SIMDE", "1"), ("LC_ATTN_SIMDE", "1"),     # norms, attention, and the
                       ("LC_SGEMM_SIMDE", "1"), ("LC_GEMM_SIMDE", "1"),    # decode layer with every
                       ("LC_MATHFN_SIMDE", "1")]),                         # AVX-512 body it calls
    ("_simde_gt", [("LC_GT_SIMDE", "1")]),                                 # gradient tables
]


def _extension(name, extra_macros=()):
    return Extension(
        f"lutcore._native.{name}",
        [f"lutcore/_native/{name}.pyx"],
        include_dirs=[os.path.join(HERE, "include"), np.get_include()],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        define_macros=macros + list(extra_macros),
        depends=deps,
    )


if SIMDE_TWINS:
    exts = [_extension(name, extra) for name, extra in SIMDE_MODULES]
else:
    exts = [_extension(name) for name in MODULES]



def _build_jobs():
    """Parallel compile jobs: LUTCORE_BUILD_JOBS, else the CPUs this process may use."""
    env = os.environ.get("LUTCORE_BUILD_JOBS", "")
    if env.strip():
        try:
            return max(1, int(env))
        except ValueError:
            sys.exit(f"lutcore: LUTCORE_BUILD_JOBS must be a whole number of jobs, got {env!r}")
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class BuildClibParallel(build_clib):
    """build_clib compiling the per-ISA libraries side by side (one compiler process each;
    pip builds serially otherwise)."""

    def build_libraries(self, libraries):
        jobs = _build_jobs()
        if jobs <= 1 or len(libraries) <= 1:
            return super().build_libraries(libraries)
        # the longest first (the SIMDe library of the test twins holds a dozen sources)
        order = sorted(libraries, key=lambda lib: -len(lib[1]["sources"]))
        with ThreadPoolExecutor(jobs) as pool:
            for f in [pool.submit(super(BuildClibParallel, self).build_libraries, [lib]) for lib in order]:
                f.result()


class BuildExtWithBodies(build_ext):
    """build_ext that first builds the per-ISA libraries (plain build_ext, as in
    ``setup.py build_ext --inplace`` or an editable install, would only link them),
    and compiles the extensions in parallel (``-j`` given wins)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = _build_jobs()

    def run(self):
        if self.distribution.has_c_libraries():
            self.run_command("build_clib")
        super().run()


setup(
    cmdclass={"build_ext": BuildExtWithBodies, "build_clib": BuildClibParallel},
    libraries=libraries,
    ext_modules=cythonize(
        exts,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
        compile_time_env={"HAVE_OPENMP": HAVE_OMP},
    ),
)
