"""Build lutcore's native extensions.

Design: the C lives in csrc/ (one folder per kernel family, csrc/core/ for the shared pieces)
and is wrapped by thin
Cython modules under lutcore/_native/.  AVX2 bodies are compiled with per-function ``target``
attributes inside the headers; bodies for wider ISAs live in their own translation units, each
compiled alone with its ISA's flags into a static library that every extension links, and chosen
at run time from the CPU's features -- so one binary runs on any x86-64 (and the portable C bodies
run everywhere else).  The native modules are the one list in lutcore/_native/__init__.py
(``MODULES``, read here as text: one extension each); ``FAMILIES`` below adds, per family with
them, generic sources, per-ISA bodies with their flags and the SIMDe twin; every body library
and twin is built from it.  A .pyx the list does not name stops the build.

The SIMDe twins: the same AVX-512 sources compiled once more against SIMDe (the headers of the
``simde-py`` package, in the test extra) with AVX2+FMA flags, through .c files this script
generates into build/simde-src/ (each defines LC_SIMDE and #includes the real body), linked into
test-only extensions (lutcore._native._simde*, the ``twin`` column) that run them on any x86-64
with AVX2; a family that asks (``simde_avx2``) also gets its AVX2 sources so, compiled with the
baseline flags (SIMDe emulating AVX2 and FMA), which run on any x86-64 at all.
A normal build (``pip install .``, a wheel, an editable install) never builds them and needs no
SIMDe; ``LUTCORE_SIMDE_TWINS=1`` builds ONLY them (and the body libraries they link), which is
what the test suite does on first use (tests/simde_twins.py, into a cache outside the package).
The build is never tuned to the build machine's CPU and never relaxes IEEE semantics;
-ffp-contract=off keeps float results identical across paths.

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

IS_X86 = platform.machine().lower() in ("x86_64", "amd64", "x86-64") and sys.platform != "win32"
AVX512_FLAGS = ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx2", "-mfma", "-mf16c", "-mbmi2"]
AVX2_FLAGS = ["-mavx2", "-mfma", "-mf16c", "-mbmi2"]
VNNI_FLAGS = AVX512_FLAGS + ["-mavx512vnni"]
VBMI_FLAGS = AVX512_FLAGS + ["-mavx512vbmi", "-mavx512vnni"]

# The native modules: lutcore/_native/__init__.py's MODULES is the one list (the package reads it
# for lutcore._threads.record and lutcore._simd.bodies; here it names the extensions).  Read as
# text: the package cannot be imported before it is built.
def _native_modules():
    import ast
    src = open(os.path.join(HERE, "lutcore", "_native", "__init__.py")).read()
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["MODULES"]:
            return tuple(ast.literal_eval(node.value))
    sys.exit("lutcore: lutcore/_native/__init__.py defines no MODULES")


MODULES = _native_modules()
_unlisted = sorted(os.path.basename(f)[:-4] for f in glob.glob(os.path.join(HERE, "lutcore", "_native", "*.pyx"))
                   if not os.path.basename(f).startswith("_simde") and os.path.basename(f)[:-4] not in MODULES)
if _unlisted:
    sys.exit(f"lutcore: lutcore/_native/{_unlisted[0]}.pyx is not in lutcore/_native/__init__.py MODULES")

# The table of families with per-ISA bodies or a SIMDe twin: every body library and twin below
# is built from it (a module of MODULES without a row here is one extension of its generic C).
# Add an ISA body of a family here and nowhere else.  One dict per family:
#   name     the family; its C lives in csrc/<name>/ (<name>.h: declarations, body table and the
#            generic body; x86/<isa>.c: the per-ISA bodies)
#   module   the Cython module lutcore/_native/<module>.pyx wrapping it (several families may share one)
#   sources  generic C sources compiled into that extension ([] while the family is header-only)
#   bodies   [(isa, [sources], flags)]: the per-ISA body files, each compiled alone with its ISA's
#            flags into the static library lutcore_<name>_<isa> that every extension links
#   simde    the macro that makes the family bind its SIMDe-compiled bodies, or None (no twin).
#            The build generates, per avx512* body source, build/simde-src/<name>/<file>.c that
#            defines LC_SIMDE and #includes the body; they compile with AVX2 flags into
#            lutcore_simde_<name> (only with LUTCORE_SIMDE_TWINS=1)
#   simde_avx2  optional, False: the family binds the SIMDe copies of its avx2 bodies too
#            (LC_XBODY); the build generates them the same way and compiles them with the baseline
#            flags (SIMDe emulates AVX2 and FMA) into lutcore_simde_<name>_avx2: the twin runs the
#            AVX2 body on an x86-64 without AVX2
#   twin     the test-only extension lutcore/_native/<twin>.pyx (it includes <module>.pyx) linked
#            with those copies; families of one module share one twin
#   calls    other families whose bodies this family's code calls (its twin binds their copies too)
FAMILIES = [
    dict(name="gemm", module="gemm", sources=[], bodies=[
        ("avx512", ["csrc/gemm/x86/avx512.c"], AVX512_FLAGS),
        ("avx512vnni", ["csrc/gemm/x86/avx512_vnni.c"], VNNI_FLAGS),
        ("avx512vbmi", ["csrc/gemm/x86/avx512_vbmi.c"], VBMI_FLAGS)],
        simde="LC_GEMM_SIMDE", twin="_simde", calls=[]),
    dict(name="sgemm", module="sgemm", sources=[], bodies=[
        ("avx512", ["csrc/sgemm/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_SGEMM_SIMDE", twin="_simde_sgemm", calls=[]),
    # AVX-512 F/BW, and + VBMI for relu8's byte permutes
    dict(name="elementwise", module="elementwise", sources=[], bodies=[
        ("avx512", ["csrc/elementwise/x86/avx512.c"], AVX512_FLAGS),
        ("avx512vbmi", ["csrc/elementwise/x86/avx512_vbmi.c"], AVX512_FLAGS + ["-mavx512vbmi"])],
        simde="LC_EW_SIMDE", twin="_simde_ew", calls=[]),
    # the direct small-K convolution (a first conv): AVX-512 F/BW (madd), + VNNI (vpdpwssd)
    dict(name="conv2d", module="im2col", sources=[], bodies=[
        ("avx512", ["csrc/conv2d/x86/avx512.c"], AVX512_FLAGS),
        ("avx512vnni", ["csrc/conv2d/x86/avx512_vnni.c"], VNNI_FLAGS)],
        simde="LC_C2D_SIMDE", twin="_simde_im2col", calls=[]),
    # the gradient-table pass: AVX2 (8-lane gathers) and AVX-512 (16); its planes form: VBMI (vpermi2b)
    dict(name="gradtables", module="gradtables", sources=[], bodies=[
        ("avx2", ["csrc/gradtables/x86/avx2.c"], AVX2_FLAGS),
        ("avx512", ["csrc/gradtables/x86/avx512.c"], AVX512_FLAGS),
        ("avx512vbmi", ["csrc/gradtables/x86/avx512_vbmi.c"], AVX512_FLAGS + ["-mavx512vbmi"])],
        simde="LC_GT_SIMDE", twin="_simde_gt", calls=[]),
    dict(name="mathfn", module="mathfn", sources=[], bodies=[
        ("avx512", ["csrc/mathfn/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_MATHFN_SIMDE", twin="_simde_mathfn", calls=[]),
    # causal conv1d: conv.h's loops compiled with the AVX-512 flags
    dict(name="conv", module="conv", sources=[], bodies=[
        ("avx512", ["csrc/conv/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_CONV_SIMDE", twin="_simde_conv", calls=[]),
    # the selective scan: scan_impl.h at 16 lanes
    dict(name="scan", module="scan", sources=[], bodies=[
        ("avx512", ["csrc/scan/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_SCAN_SIMDE", twin="_simde_scan", calls=[]),
    dict(name="optim", module="optim", sources=[], bodies=[
        ("avx512", ["csrc/optim/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_OPTIM_SIMDE", twin="_simde_optim", calls=[]),
    # the norms (one source x86/body.h): AVX2 (8 rows a vector) and AVX-512 (16)
    dict(name="norm", module="norm", sources=[], bodies=[
        ("avx2", ["csrc/norm/x86/avx2.c"], AVX2_FLAGS),
        ("avx512", ["csrc/norm/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_NORM_SIMDE", twin="_simde_norm", calls=[]),
    # decode attention (its scores: the sgemm's chains)
    dict(name="attn", module="attn", sources=[], bodies=[
        ("avx512", ["csrc/attn/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_ATTN_SIMDE", twin="_simde_attn", calls=["sgemm"]),
    # gate netlists, bit-sliced: AVX-512 F/BW (vpternlogq a gate), + VPOPCNTDQ (vpopcntq)
    dict(name="netlist", module="netlist", sources=[], bodies=[
        ("avx512", ["csrc/netlist/x86/avx512.c"], AVX512_FLAGS),
        ("avx512vpopcnt", ["csrc/netlist/x86/avx512_vpopcnt.c"], AVX512_FLAGS + ["-mavx512vpopcntdq"])],
        simde="LC_NL_SIMDE", twin="_simde_netlist", calls=[]),
    # the MX GEMM: the float64 FMA tile (exact tables) and row tables (any table), AVX2 + FMA (ymm)
    # and AVX-512 F/BW/DQ (zmm); the twin holds both
    dict(name="mxgemm", module="mxgemm", sources=[], bodies=[
        ("avx2", ["csrc/mxgemm/x86/avx2.c"], AVX2_FLAGS),
        ("avx512", ["csrc/mxgemm/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_MXGEMM_SIMDE", simde_avx2=True, twin="_simde_mxgemm", calls=[]),
    # the mantissa-product GEMM (bf16 / fp16 through a significand table): a float32 tile (the exact
    # table), T's row by permutes (bf16) or gathers (fp16), vscalefps; AVX-512 F/BW/DQ
    dict(name="mantgemm", module="mantgemm", sources=[], bodies=[
        ("avx512", ["csrc/mantgemm/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_MANTGEMM_SIMDE", twin="_simde_mantgemm", calls=[]),
    # the llama decode layer (csrc/models/: a model, not a kernel): its twin runs every AVX-512 body it calls
    dict(name="models", module="models", sources=[], bodies=[], simde=None, twin="_simde_models",
         calls=["norm", "attn", "sgemm", "gemm", "mathfn"]),
    # the MX quantizer (float32 -> E8M0 scales + element codes, nearest even): AVX2 and AVX-512 F/BW/VL;
    # the twin holds both
    dict(name="mxquant", module="mxquant", sources=[], bodies=[
        ("avx2", ["csrc/mxquant/x86/avx2.c"], AVX2_FLAGS),
        ("avx512", ["csrc/mxquant/x86/avx512.c"], AVX512_FLAGS)],
        simde="LC_MXQUANT_SIMDE", simde_avx2=True, twin="_simde_mxquant", calls=[]),
]
_BY_NAME = {f["name"]: f for f in FAMILIES}
for _f in FAMILIES:
    if _f["module"] not in MODULES:
        sys.exit(f"lutcore: setup.py FAMILIES: {_f['name']}'s module {_f['module']} is not in "
                 f"lutcore/_native/__init__.py MODULES")

libraries = []
# Every extension is rebuilt when a header or a body source changes (it links the bodies' libraries).
deps = sorted(glob.glob(os.path.join("csrc", "**", "*.[ch]"), recursive=True))
INCLUDE_DIRS = ["csrc"]
# LUTCORE_SIMDE_TWINS=1: build only the SIMDe test twins (tests/simde_twins.py sets it).
SIMDE_TWINS = os.environ.get("LUTCORE_SIMDE_TWINS", "0") not in ("", "0")
if SIMDE_TWINS and not IS_X86:
    sys.exit("lutcore: LUTCORE_SIMDE_TWINS=1: the SIMDe twins are built on x86-64 (not Windows) only")
SIMDE_SRC = os.path.join("build", "simde-src")


def _write_if_changed(path, text):
    """Write text to path unless it already holds it (an unchanged file keeps its time: no rebuild)."""
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _simde_twin_sources(fam, avx2=False):
    """Generate the family's SIMDe twin sources (one per avx512* body source, or with avx2 one per
    avx2 body source) and return them."""
    out = []
    for isa, sources, _flags in fam["bodies"]:
        if not (isa == "avx2" if avx2 else isa.startswith("avx512")):
            continue          # (an AVX2 body without simde_avx2 runs natively wherever the twins run)
        for src in sources:
            gen = os.path.join(SIMDE_SRC, fam["name"], os.path.basename(src))
            rel = os.path.relpath(os.path.join(HERE, src), os.path.join(HERE, os.path.dirname(gen)))
            _write_if_changed(os.path.join(HERE, gen), (
                f"/* generated by setup.py (its table of families): {src} compiled against SIMDe with\n"
                f" * AVX2+FMA flags for the test-only twin lutcore._native.{fam['twin']}. */\n"
                f"#define LC_SIMDE 1\n#include \"{rel.replace(os.sep, '/')}\"\n"))
            out.append(gen)
    return out


if IS_X86:
    simde_include = []
    if SIMDE_TWINS:
        try:
            import simde_py
        except ImportError:
            sys.exit("lutcore: LUTCORE_SIMDE_TWINS=1 needs the simde-py package (pip install simde-py, "
                     "or pip install -e \".[test]\")")
        simde_include = [simde_py.get_include()]
    body_cflags = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-std=c11", "-Wno-unused-function",
                   "-Wno-psabi"] + G_FLAGS
    for fam in FAMILIES:
        for isa, sources, flags in fam["bodies"]:
            libraries.append((f"lutcore_{fam['name']}_{isa}", {
                "sources": sources, "include_dirs": INCLUDE_DIRS, "cflags": body_cflags + flags,
                "obj_deps": {"": deps}}))
        if SIMDE_TWINS and fam["simde"]:
            libraries.append((f"lutcore_simde_{fam['name']}", {
                "sources": _simde_twin_sources(fam), "include_dirs": INCLUDE_DIRS + simde_include,
                "cflags": body_cflags + AVX2_FLAGS, "obj_deps": {"": deps}}))
            if fam.get("simde_avx2"):
                libraries.append((f"lutcore_simde_{fam['name']}_avx2", {
                    "sources": _simde_twin_sources(fam, avx2=True), "include_dirs": INCLUDE_DIRS + simde_include,
                    "cflags": body_cflags, "obj_deps": {"": deps}}))
    macros.append(("LC_HAVE_X86_BODIES", "1"))


def _extension(name, sources=(), extra_macros=()):
    return Extension(
        f"lutcore._native.{name}",
        [f"lutcore/_native/{name}.pyx"] + list(sources),
        include_dirs=[os.path.join(HERE, d) for d in INCLUDE_DIRS] + [np.get_include()],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
        define_macros=macros + list(extra_macros),
        depends=deps,
    )


def _modules():
    """(module, generic sources) per native module, in MODULES order."""
    mods = {m: [] for m in MODULES}
    for fam in FAMILIES:
        mods[fam["module"]].extend(fam["sources"])
    return list(mods.items())


def _twins():
    """(twin, its module, generic sources, SIMDe macros) per test-only twin, in table order:
    the macros of its families and of the families they call."""
    twins = {}
    for fam in FAMILIES:
        if fam["twin"] is None:
            continue
        mod, srcs, mac = twins.setdefault(fam["twin"], (fam["module"], [], []))
        if mod != fam["module"]:
            sys.exit(f"lutcore: setup.py FAMILIES: twin {fam['twin']} spans modules {mod} and {fam['module']}")
        srcs.extend(fam["sources"])
        for m in [fam["simde"]] + [_BY_NAME[c]["simde"] for c in fam["calls"]]:
            if m and m not in mac:
                mac.append(m)
    return [(t, mod, srcs, mac) for t, (mod, srcs, mac) in twins.items()]


if SIMDE_TWINS:
    exts = [_extension(t, srcs, [(m, "1") for m in mac]) for t, _mod, srcs, mac in _twins()]
else:
    exts = [_extension(name, srcs) for name, srcs in _modules()]


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
