"""GEMM through a 16x16 multiplier's gate netlist (lutcore.ops.netlist, bit-sliced) beside the
per-product C model of the same circuit.

    group                                     lutcore                     peer
    netlist gemm 16x16 array 64x1024x64       ops.netlist.gemm, each      the same gates as a C function in
                                              SIMD path, 2 threads        EvoApproxLib's style (uint32_t
                                                                          mul16u_x(uint16_t A, uint16_t B),
                                                                          one 2-input gate a line), called once
                                                                          per product by a C loop (cc -O3, ctypes,
                                                                          1 thread)

The circuit: an unsigned 16x16 array multiplier of AND partial products and ripple adders, its
full adders as five 2-input gates (XOR, XOR, AND, AND, OR) as EvoApproxLib's exact mul16u are
written -- tests/ops/test_netlist.py's array_multiplier(16, 16, two_input=True), 1411 gates.
Validation first: both equal A @ B.  ``ops`` = M N K products (the extra_info ``macs``);
G MAC/s = macs / time.  The peer needs a C compiler (cc, else skipped).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from lutbench import THREADS, dim

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests"),
                str(Path(__file__).resolve().parents[1] / "tests" / "ops")]
from test_netlist import array_multiplier  # noqa: E402

M, K, N = dim(64), dim(1024), dim(64)
SHAPE = f"{M}x{K}x{N}"
GROUP = pytest.mark.benchmark(group=f"netlist gemm 16x16 array {SHAPE} (M x K x N)")


@pytest.fixture(scope="module")
def circuit():
    g, o = array_multiplier(16, 16, two_input=True)
    rng = np.random.default_rng(0)
    A = rng.integers(0, 1 << 16, (M, K)).astype(np.uint16)
    B = rng.integers(0, 1 << 16, (K, N)).astype(np.uint16)
    return g, o, A, B, A.astype(np.int64) @ B.astype(np.int64)


def c_model(gates, outputs, a_bits, b_bits, name="mul16u_x"):
    """The netlist as C in EvoApproxLib's style: one uint64_t an input bit or gate, each gate's
    function from its truth table over the inputs it reads."""
    first = 2 + a_bits + b_bits
    lines = [f"uint32_t {name}(const uint16_t A, const uint16_t B)", "{", "  uint32_t O;",
             "  uint8_t n_0 = 0, n_1 = 1;"]
    lines += [f"  uint8_t n_{2 + i} = (A >> {i}) & 1;" for i in range(a_bits)]
    lines += [f"  uint8_t n_{2 + a_bits + j} = (B >> {j}) & 1;" for j in range(b_bits)]
    for g, (x, y, z, tt) in enumerate(gates):
        terms = []
        for m in range(8):
            if (tt >> m) & 1:
                lit = [f"n_{v}" if (m >> s) & 1 else f"!n_{v}" for v, s in ((x, 2), (y, 1), (z, 0))]
                terms.append("(" + " & ".join(lit) + ")")
        expr = {0xC0: f"n_{x} & n_{y}", 0x3C: f"n_{x} ^ n_{y}", 0xFC: f"n_{x} | n_{y}"}.get(tt)
        if expr is None:
            expr = " | ".join(terms) if terms else "0"
        lines.append(f"  uint8_t n_{first + g} = {expr};")
    lines.append("  O = 0;")
    lines += [f"  O |= (uint32_t)(n_{o} & 1) << {p};" for p, o in enumerate(outputs)]
    lines += ["  return O;", "}"]
    return "\n".join(lines)


DRIVER = """
void gemm_peer(int64_t *C, const uint16_t *A, const uint16_t *B, int64_t M, int64_t N, int64_t K)
{
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            int64_t s = 0;
            for (int64_t k = 0; k < K; k++) s += mul16u_x(A[m * K + k], B[k * N + n]);
            C[m * N + n] = s;
        }
}
"""


@pytest.fixture(scope="module")
def peer(circuit):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the C model")
    g, o = circuit[:2]
    d = tempfile.mkdtemp()
    src, lib = os.path.join(d, "mul16u_x.c"), os.path.join(d, "mul16u_x.so")
    with open(src, "w") as f:
        f.write("#include <stdint.h>\n__attribute__((noinline))\n" + c_model(g, o, 16, 16) + DRIVER)
    subprocess.run([cc, "-O3", "-shared", "-fPIC", src, "-o", lib], check=True)
    dll = ctypes.CDLL(lib)
    dll.gemm_peer.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
    yield dll
    shutil.rmtree(d, ignore_errors=True)


@GROUP
def test_netlist_gemm(benchmark, record, simd, circuit):
    from lutcore.ops import netlist
    g, o, A, B, want = circuit

    def run():
        return netlist.gemm(A, B, g, o, a_bits=16, b_bits=16, a_signed=False, b_signed=False,
                            product_signed=False, threads=THREADS)
    assert np.array_equal(run(), want)
    record("netlist.gemm", SHAPE, "lutcore", ops=M * N * K, macs=M * N * K, gates=len(g))
    benchmark(run)


@GROUP
def test_c_model_per_product_peer(benchmark, record, circuit, peer):
    g, o, A, B, want = circuit
    C = np.zeros((M, N), np.int64)

    def run():
        peer.gemm_peer(C.ctypes.data, A.ctypes.data, B.ctypes.data, M, N, K)
        return C
    assert np.array_equal(run(), want)
    record("netlist.gemm", SHAPE, "C model per product (cc -O3)", threads=1, ops=M * N * K, macs=M * N * K,
           gates=len(g))
    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
