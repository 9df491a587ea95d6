"""search_lm(attention=True): attention's own products are layers of their own -- searched,
their products in the energy, a point's loss the loss of the model built with its assignment."""
import numpy as np
import pytest

from lutcore.search_lm import search_lm
from test_search_lm import POWER, _gpt, _ids, _ref_loss, _units


def test_attention_products_are_searched_and_counted():
    m, ids = _gpt(), _ids()
    res = search_lm(m, ids, _units(), budget=40, seq_len=16, progress=False, attention=True)
    macs = res.config["macs"]
    assert macs["h.0.attn.qk"] == macs["h.0.attn.pv"] == 5 * 2 * 16 * 16 * 8     # windows x heads x L x L x hd
    assert all({"h.0.attn.qk", "h.0.attn.pv"} <= set(p.assignment) for p in res.points)
    p = next(p for p in res.points if p.assignment["h.0.attn.pv"] == "mitchell")
    assert abs(_ref_loss(m, dict(p.assignment), ids, 16) - p.metric) < 1e-9
    e = sum(macs[l] * POWER[u] for l, u in p.assignment.items()) / sum(macs.values())
    assert p.energy == pytest.approx(e, rel=1e-12)
    plain = search_lm(m, ids, _units(), budget=24, seq_len=16, progress=False)
    assert not any(k.endswith((".qk", ".pv")) for k in plain.config["macs"])
    only = search_lm(m, ids, _units(), budget=12, seq_len=16, progress=False, layers=["*.qk"], greedy=False)
    assert all(set(p.assignment) == {"h.0.attn.qk"} for p in only.points)
    assert np.isfinite([p.metric for p in only.points]).all()
