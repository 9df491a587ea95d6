"""A save killed at each of its renames leaves one complete save loadable (issue 16).

Not timing luck: ``lutcore._io._crash_hook`` is called before every step of a save
that changes what the directory holds (the journal rename that switches to the
new save, each file put in place under its usual name, each stale file removed,
the journal removed).  A child process saves over an existing save and ends
itself with ``os._exit`` — no cleanup runs, as with kill -9 — at step k, for
every k.  After each kill the directory must load (resume, from_pretrained,
Units.load) as exactly the old save or exactly the new one, never a mixture, and
the next save must finish or sweep what the killed one left.
"""
from _paths import ROOT  # noqa: F401
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lutcore._io import JOURNAL, TMP_PREFIX
from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.train.trainer import Trainer
from lutcore.units import Units, approx

TINY = dict(d_model=8, n_layer=2, vocab_size=256, d_state=4, d_conv=4, expand=2)
TEXT = "a crash between renames must not cost the run. " * 10
KILLED = 77

HOOK = """
    import os, sys
    import lutcore._io as io
    kill_at = int(sys.argv[1])
    seen = []
    def hook(tag):
        if len(seen) == kill_at:
            os._exit({killed})
        seen.append(tag)
    io._crash_hook = hook
""".format(killed=KILLED)

SAVES = {
    # the child's new save over ``d``: one more training step / weights doubled / other units
    "checkpoint": """
        import numpy as np
        from lutcore.train.trainer import Trainer
        tr = Trainer.resume(d)
        tr.train({text!r}, seq_len=8, batch_size=2, max_steps=tr.global_step + 1)
        tr.save_checkpoint(d)
    """,
    "pretrained": """
        from lutcore.models.mamba import MambaLM
        m = MambaLM.from_pretrained(d)
        for v in m.parameters().values():
            v *= 2
        m.save_pretrained(d)
    """,
    "units": """
        from lutcore.units import approx
        approx.mitchell().save(d)
    """,
}


def _child(kind, d, kill_at):
    code = textwrap.dedent(HOOK) + f"d = {str(d)!r}\n" + textwrap.dedent(SAVES[kind].format(text=TEXT)) + \
        "print('TAGS', '|'.join(seen))\n"
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code, str(kill_at)], capture_output=True, text=True, env=env,
                          timeout=120)


def _params(model):
    return {k: v.copy() for k, v in model.parameters().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _old_and_new(kind, d):
    """Write the old save into ``d``; return (load, old state, new state) where load(d)
    gives the state a directory holds, as the parent computes it."""
    if kind == "checkpoint":
        tr = Trainer(MambaLM(MambaConfig(**TINY)), threads=1)
        tr.train(TEXT, seq_len=8, batch_size=2, max_steps=2)
        tr.save_checkpoint(d)
        old = (tr.global_step, _params(tr.model))
        tr.train(TEXT, seq_len=8, batch_size=2, max_steps=3)               # what the child does
        new = (tr.global_step, _params(tr.model))

        def load(p):
            r = Trainer.resume(p, threads=1)
            return r.global_step, _params(r.model)
        return load, old, new, lambda x, y: x[0] == y[0] and _same(x[1], y[1])
    if kind == "pretrained":
        m = MambaLM(MambaConfig(**TINY))
        m.save_pretrained(d)
        old = _params(m)
        new = {k: v * 2 for k, v in old.items()}
        return (lambda p: _params(MambaLM.from_pretrained(p))), old, new, _same
    Units.exact().save(d)
    return Units.load, Units.exact(), approx.mitchell(), lambda x, y: x == y


RESAVE = {"checkpoint": lambda d: Trainer.resume(d, threads=1).save_checkpoint(d),
          "pretrained": lambda d: MambaLM.from_pretrained(d).save_pretrained(d),
          "units": lambda d: Units.load(d).save(d)}


@pytest.mark.parametrize("kind", list(SAVES))
def test_a_save_killed_at_each_rename_leaves_a_complete_save(tmp_path, kind):
    d = tmp_path / kind
    load, old, new, same = _old_and_new(kind, d)
    probe = tmp_path / "probe"
    _old_and_new(kind, probe)
    r = _child(kind, probe, 10 ** 6)                                          # not killed: the steps
    assert r.returncode == 0, r.stderr[-3000:]
    tags = r.stdout.split("TAGS ", 1)[1].strip().split("|")
    assert tags[0] == "journal" and tags[-1] == "unjournal" and len(tags) >= 3, tags
    assert same(load(probe), new)
    for k, tag in enumerate(tags):
        _old_and_new(kind, d)                                                 # back to the old save
        r = _child(kind, d, k)
        assert r.returncode == KILLED, (k, tag, r.returncode, r.stderr[-3000:])
        got = load(d)
        want = old if k == 0 else new                 # the journal's rename is the switch
        assert same(got, want), f"killed before {tag!r}: the directory does not load as the " \
                                f"{'old' if k == 0 else 'new'} save"
        if k > 0:
            assert os.path.exists(d / JOURNAL)                                # read through the journal
        # the next save finishes the switch (or sweeps the unfinished one) and leaves no debris
        RESAVE[kind](d)
        assert same(load(d), want)
        left = [n for n in os.listdir(d) if n.startswith(TMP_PREFIX) or n == JOURNAL or n.endswith("-part")]
        assert not left, (tag, left)


def test_a_killed_save_of_a_model_stays_loadable_by_transformers(tmp_path):
    """The usual names stay: after a save (and after a killed one is finished by the
    next) transformers opens the directory as it is."""
    import transformers as tf  # the test extra installs it
    d = tmp_path / "m"
    m = MambaLM(MambaConfig(**TINY, discretization="simplified"))
    m.save_pretrained(d)
    r = _child("pretrained", d, 2)                                           # killed mid-switch
    assert r.returncode == KILLED
    m2 = MambaLM.from_pretrained(d)
    m2.save_pretrained(d)                                                     # finishes and re-saves
    hf = tf.MambaForCausalLM.from_pretrained(d)
    sd = hf.state_dict()
    for k, v in m2.parameters().items():
        if k in sd:
            assert np.array_equal(sd[k].numpy(), v), k
