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


def test_mamba_state_save_load(tmp_path):
    from lutcore.models import MambaConfig, MambaLM
    m = MambaLM(MambaConfig(d_model=16, n_layer=2, vocab_size=32, d_state=4))
    logits, st = m.step([1, 2])
    f = tmp_path / "state.safetensors"
    m.save_state(st, f)
    st2 = m.load_state(f)
    a, _ = m.step([3, 4], st)
    b, _ = m.step([3, 4], st2)
    assert np.array_equal(a, b)
    other = MambaLM(MambaConfig(d_model=16, n_layer=3, vocab_size=32, d_state=4))
    import pytest
    with pytest.raises(ValueError):
        other.load_state(f)
