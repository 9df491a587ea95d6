"""The SIMDe test twins are built for the tests, from this checkout's sources, into
a cache keyed by every build input (tests/simde_twins.py); a failed build is an
ImportError that names the command and the log, never a skip."""
import os
import platform
import shutil

import pytest

import simde_twins

IS_X86 = platform.machine().lower() in ("x86_64", "amd64")


def _copy_sources(dst):
    for rel in simde_twins.source_files():
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(os.path.join(simde_twins.ROOT, rel), os.path.join(dst, rel))


def test_twins_come_from_the_keyed_cache_of_these_sources():
    if not IS_X86:   # setup.py refuses: the AVX2-flag build is x86-64 only
        with pytest.raises(ImportError, match="x86-64"):
            from lutcore._native import _simde  # noqa: F401
        return
    from lutcore._native import _simde, _simde_attn, _simde_conv, _simde_ew, _simde_mathfn, _simde_norm, _simde_optim
    from lutcore._native import _simde_scan, _simde_sgemm
    from lutcore._native import _simde_gt, _simde_models, _simde_mxgemm, _simde_netlist, _simde_mxquant
    d = simde_twins.ensure_built()
    assert os.path.basename(d) == simde_twins.build_key()
    for m in (_simde, _simde_attn, _simde_conv, _simde_ew, _simde_mathfn, _simde_norm, _simde_optim, _simde_scan,
              _simde_sgemm, _simde_gt,
              _simde_models, _simde_netlist, _simde_mxgemm, _simde_mxquant):
        assert os.path.dirname(m.__file__) == os.path.join(d, "lutcore", "_native"), m.__file__


def test_key_follows_every_source(tmp_path):
    _copy_sources(tmp_path)
    k0 = simde_twins.build_key(str(tmp_path))
    assert k0 == simde_twins.build_key()
    for rel in ("csrc/gemm/x86/avx512.c", "csrc/core/simd.h", "csrc/sgemm/sgemm.h", "lutcore/_native/gemm.pyx", "setup.py"):
        p = tmp_path / rel
        old = p.read_bytes()
        p.write_bytes(old + b"\n")
        assert simde_twins.build_key(str(tmp_path)) != k0, rel
        p.write_bytes(old)
    assert simde_twins.build_key(str(tmp_path)) == k0


def test_failed_build_is_an_import_error_naming_command_and_log(tmp_path, monkeypatch):
    src = tmp_path / "src"
    _copy_sources(src)
    (src / "setup.py").write_text("raise SystemExit('deliberately broken build')\n")
    finder = simde_twins.TwinFinder(str(src))
    cache = tmp_path / "cache"
    monkeypatch.setenv("LUTCORE_SIMDE_CACHE", str(cache))
    with pytest.raises(ImportError) as e:
        finder.find_spec("lutcore._native._simde")
    msg = str(e.value)
    assert "deliberately broken build" in msg and "LUTCORE_SIMDE_TWINS=1" in msg and "setup.py build_ext" in msg
    log = os.path.join(str(cache), simde_twins.build_key(str(src)) + ".log")
    assert log in msg and os.path.exists(log)
    assert not os.path.isdir(os.path.join(str(cache), simde_twins.build_key(str(src))))  # nothing half-built kept
    with pytest.raises(ImportError, match="deliberately broken build"):   # once per session, not per module
        finder.find_spec("lutcore._native._simde_ew")
    assert finder.find_spec("lutcore._native.gemm") is None               # the package's own modules untouched
