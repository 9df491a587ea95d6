"""A worked experiment: a small CNN on scikit-learn's 8x8 digits through the units.

Design: the pieces the example (examples/torch_digits.py) and the test
(tests/torch/test_torch_digits.py) share — the data split, the network, a seeded
training loop and the accuracy — and nothing that prints.  Needs scikit-learn
(``load_digits`` ships with it: no download).  Everything is seeded, and the
network is small enough to train in seconds on 2 cores.

    tensor   dtype    shape          what
    x        float32  (n, 1, 8, 8)   pixel values / 16
    y        int64    (n,)           the digit
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["load", "DigitsCNN", "train", "accuracy", "float_baseline", "print_table", "plot_bars"]


def load(seed: int = 0, test_share: float = 0.2):
    """(x_train, y_train, x_test, y_test) of load_digits, split by a seeded permutation."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise ImportError("the digits experiment needs scikit-learn: pip install scikit-learn") from e
    d = load_digits()
    x = torch.from_numpy((d.images / 16.0).astype(np.float32)).unsqueeze(1)      # (1797, 1, 8, 8)
    y = torch.from_numpy(d.target.astype(np.int64))                               # (1797,)
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(len(y)))
    n_test = int(round(len(y) * test_share))
    te, tr = perm[:n_test], perm[n_test:]
    return x[tr], y[tr], x[te], y[te]


class DigitsCNN(nn.Module):
    """conv 1->16 -> relu -> conv 16->32 -> relu -> pool -> conv 32->32 -> relu -> pool -> linear 128->10."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),            # (n, 16, 8, 8)
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),           # (n, 32, 8, 8)
            nn.MaxPool2d(2),                                      # (n, 32, 4, 4)
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),           # (n, 32, 4, 4)
            nn.MaxPool2d(2))                                      # (n, 32, 2, 2)
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def train(model: nn.Module, x, y, epochs: int = 12, lr: float = 3e-3, batch: int = 64, seed: int = 0,
          progress=None) -> nn.Module:
    """Adam on cross-entropy, seeded batch order; works on float and approximate models alike
    (an approximate model trains through its STE or unit backward).  ``progress``: a tqdm-like
    wrapper for the epoch range, or None."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    epochs_it = range(epochs) if progress is None else progress(range(epochs))
    model.train()
    for _ in epochs_it:
        perm = torch.randperm(len(y), generator=g)
        for i in range(0, len(y), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    model.eval()
    return model


def accuracy(model: nn.Module, x, y) -> float:
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def float_baseline(epochs: int = 8, seed: int = 0, progress=None):
    """(model, (x_train, y_train, x_test, y_test)): the seeded split and the CNN trained in float
    (Adam, lr 1e-2, batch 128), where the digits examples start."""
    torch.manual_seed(seed)
    data = load(seed=seed)
    model = train(DigitsCNN(), data[0], data[1], epochs=epochs, lr=1e-2, batch=128, seed=seed, progress=progress)
    return model, data


def print_table(rows, head) -> None:
    """Print ``rows`` (tuples of str) under ``head`` as aligned columns with a rule."""
    w = [max(len(r[i]) for r in [head] + list(rows)) for i in range(len(head))]
    for i, r in enumerate([head] + list(rows)):
        print("  ".join(c.ljust(w[j]) for j, c in enumerate(r)).rstrip())
        if i == 0:
            print("  ".join("-" * x for x in w))


def plot_bars(labels, before, after, png: str, title: str, legend: tuple, width: float = 0.8) -> None:
    """A PNG of two bars per label (``after`` entries None drawn as 0): test accuracy before and
    after retraining, as the digits examples draw it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(6.0, width * len(labels)), 4.5))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], list(before), 0.4, label=legend[0])
    ax.bar([x + 0.2 for x in xs], [a if a is not None else 0 for a in after], 0.4, label=legend[1])
    ax.set_xticks(list(xs), list(labels), rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1.15)
    ax.set_title(title)
    ax.legend(loc="upper center", ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
