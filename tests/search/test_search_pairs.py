"""``lutcore search --adders``: a layer's choice is a (multiplier, adder) pair, the energy counts
both (the adders' power read from their circuits' headers), and the front's assignments name
the pairs; a pair's assignment evaluates to the loss eval gives it."""
import json
import os
import sys

from lutcore.cli import main
from test_search_lm import _tiny_checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "units"))
import circuits_adders  # noqa: E402


def test_cli_search_over_multiplier_adder_pairs(tmp_path, capsys):
    ckpt = _tiny_checkpoint(tmp_path)
    written = [circuits_adders.write("16se", v, tmp_path, "c") for v in ("exact", "loa")]
    files, loa = [f for f, _ in written], written[1][1]
    out = str(tmp_path / "s")
    assert main(["search", "--checkpoint", ckpt, "--units", "exact", "mitchell", "--power", "exact=1.0",
                 "mitchell=0.4", "--adders", *files, "--accumulator", "16s:saturate", "--budget", "24",
                 "--no-progress", "--out", out]) == 0
    saved = json.load(open(os.path.join(out, "search.json")))
    names = {u for p in saved["points"] for u in p["assignment"].values()}
    assert names and all("+" in n for n in names), names
    assert any(n.endswith(loa) for n in names) and any(n.startswith("mitchell+") for n in names)
    energies = sorted(p["energy"] for p in saved["points"])
    assert energies[0] < energies[-1] <= 1.0 + 1e-12        # the exact pair is the reference
    err = capsys.readouterr().err
    assert "+" in err
