"""Smoke test: the package imports, reports its configuration and multiplies."""
import numpy as np

import lutcore


def test_show_config(capsys):
    lutcore.show_config()
    out = capsys.readouterr().out
    assert "OpenMP" in out and "SIMD" in out


def test_tiny_gemm():
    a = np.array([[1, -2], [127, -128]], np.int8)
    b = np.array([[3], [-4]], np.int8)
    assert lutcore.lut_gemm(a, b).tolist() == [[11], [127 * 3 + 512]]
