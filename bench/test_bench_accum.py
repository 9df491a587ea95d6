"""8 x 8 table products accumulated through a 16-bit approximate adder (lutcore.ops.accum) beside
the adder's C model alone and the table GEMM with exact sums.

    group                                     lutcore                     peers
    accum gemm 8x8 + add16 MxKxN              ops.accum.gemm through      (a) the adder's gates as a C function
                                              a 16-bit lower-part-OR      in EvoApproxLib's style, called once
                                              adder netlist, saturating,  per addition by a C loop over the
                                              each SIMD path, 2 threads,  same table products (cc -O3, ctypes,
                                              with and without counts     1 thread): what a user's C model costs;
                                                                          (b) lut_gemm with exact sums (no
                                                                          register), the same products

The adder: 16-bit signed, the 5 low sum bits a | b (no carry out of them), an exact ripple
adder above, 17 output bits -- 38 gates (the peer's C: 2-input gates, as EvoApproxLib writes them).  The unit: Mitchell's multiplier (the any-table
path).  Validation first: the kernel and the C loop give the same sums.  ``ops`` = M N K
products; G MAC/s = macs / time.
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

sys.path[:0] = [str(Path(__file__).resolve().parent)]
from test_bench_netlist import c_model  # noqa: E402

M, K, N = dim(256), dim(1024), dim(256)
SHAPE = f"{M}x{K}x{N}"
GROUP = pytest.mark.benchmark(group=f"accum gemm 8x8 table + 16-bit adder {SHAPE} (M x K x N)")
W, LOW = 16, 5


def loa16(two_input=False):
    """The bench's adder as a netlist (module docstring); ``two_input``: its full adders as 2-input
    gates (XOR, XOR, AND, AND, OR), as EvoApproxLib writes its C models -- the peer's form."""
    from lutcore.units.adders import Adder
    from lutcore.units.netlist import Netlist
    gates = []

    def g(x, y, z, tt):
        gates.append((x, y, z, tt))
        return 2 + 2 * W + len(gates) - 1
    a, b = [2 + i for i in range(W)], [2 + W + i for i in range(W)]
    outs, c = [], 0
    for i in range(W + 1):
        ai, bi = a[min(i, W - 1)], b[min(i, W - 1)]           # bit W: the sign-extended sum
        if i < LOW:
            outs.append(g(ai, bi, 0, 0xFC))
        elif not two_input:
            outs.append(g(ai, bi, c, 0x96))
            c = g(ai, bi, c, 0xE8)
        else:
            t = g(ai, bi, 0, 0x3C)
            outs.append(g(t, c, 0, 0x3C))
            c = g(g(ai, bi, 0, 0xC0), g(t, c, 0, 0xC0), 0, 0xFC)
        if i == W - 1 and not two_input:
            outs.append(g(ai, bi, c, 0x96))
            break
    return Adder(Netlist(W, W, W + 1, np.array(gates, np.int32), np.array(outs[:W + 1], np.int32)), True,
                 name="loa16s_5")


@pytest.fixture(scope="module")
def case():
    from lutcore.units import approx
    from lutcore.units.accumulator import Accumulator
    ad = loa16()
    u = approx.mitchell()
    acc = Accumulator(W, True, "saturate", adder=ad)
    rng = np.random.default_rng(0)
    A = rng.integers(-128, 128, (M, K)).astype(np.int8)
    B = rng.integers(-128, 128, (K, N)).astype(np.int8)
    return u, u.with_accumulator(acc), ad, A, B


DRIVER = """
static int64_t rd(uint64_t o) { return (int64_t)(o << 47) >> 47; }       /* 17-bit signed */
void accum_peer(int64_t *C, const int8_t *A, const int8_t *B, const int16_t *T, int64_t M, int64_t N, int64_t K)
{
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            int64_t r = 0;
            for (int64_t k = 0; k < K; k++) {
                const int64_t p = T[(uint8_t)A[m * K + k] * 256 + (uint8_t)B[k * N + n]];
                const int64_t s = rd(add16s_x((uint16_t)(r & 0xFFFF), (uint16_t)(p & 0xFFFF)));
                r = s > 32767 ? 32767 : s < -32768 ? -32768 : s;
            }
            C[m * N + n] = r;
        }
}
"""


@pytest.fixture(scope="module")
def peer(case):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the C model")
    ad = loa16(two_input=True)
    d = tempfile.mkdtemp()
    src, lib = os.path.join(d, "add16s_x.c"), os.path.join(d, "add16s_x.so")
    model = c_model(ad.netlist.gates, ad.netlist.outputs, W, W, name="add16s_x")
    with open(src, "w") as f:
        f.write("#include <stdint.h>\n__attribute__((noinline))\n" + model + DRIVER)
    subprocess.run([cc, "-O3", "-shared", "-fPIC", src, "-o", lib], check=True)
    dll = ctypes.CDLL(lib)
    dll.accum_peer.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 3
    yield dll
    shutil.rmtree(d, ignore_errors=True)


@GROUP
@pytest.mark.parametrize("counts", [False, True], ids=["values", "values+counts"])
def test_accum_gemm(benchmark, record, simd, case, counts):
    from lutcore.ops import accum
    u, ua, ad, A, B = case

    def run():
        return accum.gemm(A, B, ua, ua.accumulator, counts=counts, threads=THREADS)
    run()
    record("accum.gemm", SHAPE, "lutcore" + (" (+counts)" if counts else ""), ops=M * N * K, macs=M * N * K,
           gates=ad.netlist.gate_count)
    benchmark(run)


@GROUP
def test_adder_c_model_per_addition_peer(benchmark, record, case, peer):
    from lutcore.ops import accum
    u, ua, ad, A, B = case
    m = min(M, 16)                       # the C loop is slow: a slice of the rows (macs counted as run)
    C = np.zeros((m, N), np.int64)
    T = np.ascontiguousarray(u.table().reshape(-1).astype(np.int16))

    def run():
        peer.accum_peer(C.ctypes.data, A.ctypes.data, B.ctypes.data, T.ctypes.data, m, N, K)
        return C
    assert np.array_equal(run(), accum.gemm(A[:m], B, ua, ua.accumulator))
    record("accum.gemm", f"{m}x{K}x{N}", "adder C model per addition (cc -O3)", threads=1, ops=m * N * K,
           macs=m * N * K)
    benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)


@GROUP
def test_lut_gemm_exact_sums_peer(benchmark, record, simd, case):
    from lutcore.ops.gemm import lut_gemm
    u, ua, ad, A, B = case

    def run():
        return lut_gemm(A, B, u, threads=THREADS)
    run()
    record("lut_gemm", SHAPE, "table GEMM, exact sums", ops=M * N * K, macs=M * N * K)
    benchmark(run)
