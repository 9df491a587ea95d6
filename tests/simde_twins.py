"""The SIMDe test twins (lutcore._native._simde, _simde_ew, _simde_mathfn, _simde_scan, _simde_conv,
_simde_optim, _simde_sgemm, _simde_norm, _simde_attn, _simde_gt, _simde_models, _simde_mxgemm,
_simde_mantgemm, _simde_mxquant), built on first use for the tests, never by pip.

The twins are the AVX-512 bodies compiled against SIMDe (AVX2+FMA flags), so the
tests check every zmm body's bits on any x86-64 CPU with AVX2; a family that asks
(setup.py ``simde_avx2``: the MX GEMM) adds its AVX2 bodies compiled against SIMDe with
the baseline flags, which run on any x86-64.  A user's ``pip install .``
and a wheel do not build or ship them; the test suite does, here:

* ``install()`` (called by tests/conftest.py) puts a finder first on sys.meta_path
  that answers the imports ``lutcore._native._simde*`` -- and only those.
* On the first such import the finder calls ``ensure_built()``: it hashes every
  input of the build (setup.py, pyproject.toml, this file, csrc/, the .pyx/.pxd
  files, and the Python, numpy, Cython, setuptools, simde-py and compiler
  versions and CC/CFLAGS/LDFLAGS/CPPFLAGS/LUTCORE_NO_OPENMP/LUTCORE_DEBUG_INFO) into a key, and if
  ``<cache>/<key>`` does not exist yet, copies those sources into a fresh
  directory and runs ``LUTCORE_SIMDE_TWINS=1 python setup.py build_ext --inplace``
  there in a subprocess (build log kept; a lock file makes concurrent test runs
  wait for one build), then renames the directory to ``<cache>/<key>``.
  The twins are loaded from there: never stale, never mixed with the package,
  never from an old in-place build in lutcore/_native/.
* A failed build is an ImportError naming the command, the directory and the
  log with its last lines (so the SIMDe tests error, they never skip).

<cache> is ``$LUTCORE_SIMDE_CACHE``, else ``$XDG_CACHE_HOME/lutcore/simde-twins``
(``~/.cache/...``): checkouts with the same C sources share one build.
"""
import hashlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = "lutcore._native._simde"
TIMEOUT = 3600            # seconds for one build (a few minutes on 2 cores)
ENV_INPUTS = ("CC", "CFLAGS", "LDFLAGS", "CPPFLAGS", "LUTCORE_NO_OPENMP", "LUTCORE_DEBUG_INFO")


def cache_root():
    root = os.environ.get("LUTCORE_SIMDE_CACHE")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "lutcore", "simde-twins")
    return os.path.abspath(root)


def source_files(src_root=ROOT):
    """The build's inputs under src_root, relative paths, sorted."""
    out = ["setup.py", "pyproject.toml", os.path.join("tests", "simde_twins.py"),
           os.path.join("lutcore", "_native", "__init__.py")]          # MODULES: the list setup.py reads
    for top, exts in (("csrc", None), (os.path.join("lutcore", "_native"), (".pyx", ".pxd"))):
        for d, dirs, files in os.walk(os.path.join(src_root, top)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in files:
                if exts is None or f.endswith(exts):
                    out.append(os.path.relpath(os.path.join(d, f), src_root))
    return sorted(out)


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _compiler_id():
    cc = (os.environ.get("CC") or __import__("sysconfig").get_config_var("CC") or "cc").split()
    try:
        r = subprocess.run(cc + ["--version"], capture_output=True, text=True, timeout=60)
        return " ".join(cc) + " | " + (r.stdout.splitlines() or [""])[0]
    except (OSError, subprocess.SubprocessError) as e:
        return " ".join(cc) + " | " + repr(e)


def build_key(src_root=ROOT):
    h = hashlib.sha256()
    for rel in source_files(src_root):
        h.update(rel.encode() + b"\0")
        with open(os.path.join(src_root, rel), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    env = [sys.version, sys.abiflags if hasattr(sys, "abiflags") else "", platform.machine(),
           *(f"{d}={_version(d)}" for d in ("numpy", "Cython", "setuptools", "simde-py")),
           _compiler_id(), *(f"{k}={os.environ.get(k, '')}" for k in ENV_INPUTS)]
    h.update("\n".join(env).encode())
    return h.hexdigest()[:20]


def _say(msg):
    if _say.hook is not None:
        _say.hook(msg)
    else:
        print(msg, file=sys.stderr, flush=True)


_say.hook = None


def _lock(path):
    f = open(path, "a+")
    try:
        import fcntl
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    except ImportError:   # not POSIX: no concurrent builds expected
        pass
    return f


def _children_cpu():
    try:
        import resource
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    except ImportError:
        return 0.0


def ensure_built(src_root=ROOT, cache=None):
    """The directory holding lutcore/_native/_simde*.so built from src_root's sources,
    building it if needed.  ImportError (command, directory, log tail) if the build fails."""
    cache = cache or cache_root()
    os.makedirs(cache, exist_ok=True)
    key = build_key(src_root)
    final = os.path.join(cache, key)
    if os.path.isdir(final):
        os.utime(final)                    # in use: kept by _prune
        return final
    with _lock(os.path.join(cache, key + ".lock")):
        if os.path.isdir(final):           # built by a concurrent run while we waited
            return final
        work = os.path.join(cache, f"{key}.build-{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        for rel in source_files(src_root):
            os.makedirs(os.path.dirname(os.path.join(work, rel)), exist_ok=True)
            shutil.copy2(os.path.join(src_root, rel), os.path.join(work, rel))
        for pkg in ("lutcore", os.path.join("lutcore", "_native")):   # package markers for Cython
            open(os.path.join(work, pkg, "__init__.py"), "a").close()
        with open(os.path.join(work, "README.md"), "w") as f:         # pyproject's readme
            f.write("lutcore SIMDe test twins (build copy)\n")
        cmd = [sys.executable, "setup.py", "build_ext", "--inplace", "-j", str(os.cpu_count() or 1)]
        env = dict(os.environ, LUTCORE_SIMDE_TWINS="1")
        log = os.path.join(cache, key + ".log")
        _say(f"lutcore tests: building the SIMDe test twins (first use of these sources; a few minutes) "
             f"in {work}, log {log}")
        t0, cpu0 = time.time(), _children_cpu()
        with open(log, "w") as f:
            try:
                r = subprocess.run(cmd, cwd=work, env=env, stdout=f, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, timeout=TIMEOUT)
                rc = r.returncode
            except subprocess.TimeoutExpired:
                rc = f"timeout after {TIMEOUT} s"
        if rc != 0:
            with open(log, errors="replace") as f:
                tail = "".join(f.readlines()[-40:])
            shutil.rmtree(work, ignore_errors=True)    # the log stays
            raise ImportError(
                f"building the SIMDe test twins failed ({rc}): LUTCORE_SIMDE_TWINS=1 {' '.join(cmd)} "
                f"in {work}; full log {log}; last lines:\n{tail}")
        shutil.rmtree(os.path.join(work, "build"), ignore_errors=True)   # objects: only the .so files are used
        for f in os.listdir(os.path.join(work, "lutcore", "_native")):
            if f.endswith(".c"):
                os.remove(os.path.join(work, "lutcore", "_native", f))
        os.replace(work, final)
        _prune(cache, keep=key)
        _say(f"lutcore tests: SIMDe test twins built in {time.time() - t0:.0f} s "
             f"({_children_cpu() - cpu0:.0f} s CPU): {final}")
        return final


def _prune(cache, keep, days=14):
    """Remove builds of other sources unused for `days` days (each is tens of MB)."""
    old = time.time() - days * 86400
    for name in os.listdir(cache):
        p = os.path.join(cache, name)
        if not name.startswith(keep) and os.path.getmtime(p) < old:
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.remove(p)


class TwinFinder(importlib.abc.MetaPathFinder):
    """Answers ``lutcore._native._simde*`` imports from the cache (building it once)."""

    def __init__(self, src_root=ROOT):
        self.src_root = src_root
        self.error = None
        self.dir = None

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(PREFIX):
            return None
        if self.error is not None:         # one failed build per session, not one per test module
            raise ImportError(self.error)
        if self.dir is None:
            try:
                self.dir = ensure_built(self.src_root)
            except ImportError as e:
                self.error = str(e)
                raise
        name = fullname.rsplit(".", 1)[1]
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            f = os.path.join(self.dir, "lutcore", "_native", name + suffix)
            if os.path.exists(f):
                return importlib.util.spec_from_file_location(fullname, f)
        raise ImportError(f"{fullname}: no such SIMDe twin in {self.dir} (setup.py's FAMILIES table "
                          f"names the twins; built: {sorted(os.listdir(os.path.join(self.dir, 'lutcore', '_native')))})")


def install():
    """Put the finder first on sys.meta_path (once)."""
    for f in sys.meta_path:
        if isinstance(f, TwinFinder):
            return f
    f = TwinFinder()
    sys.meta_path.insert(0, f)
    return f
