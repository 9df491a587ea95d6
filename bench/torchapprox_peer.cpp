// The TorchApprox CPU backend's algorithm (etrommer/torch-approx, ta_gemm_cpu.cpp), written
// here as a small torch C++ extension because TorchApprox is not on PyPI: a scalar triple
// loop, one 256x256 int32 table lookup per product, OpenMP over output rows.
//   a    int8   (M, K)     activations
//   b    int8   (N, K)     weights, one row per output (TorchApprox's layout)
//   lut  int32  (65536,)   entry (a & 0xff) * 256 + (b & 0xff): the activation is the row
//   out  int32  (M, N)     out[m, n] = sum_k lut[a[m, k], b[n, k]]
#include <torch/extension.h>
#include <cstdint>

torch::Tensor ta_gemm(torch::Tensor a, torch::Tensor b, torch::Tensor lut) {
    TORCH_CHECK(a.dtype() == torch::kInt8 && b.dtype() == torch::kInt8 && lut.dtype() == torch::kInt32);
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(1) && lut.numel() == 65536);
    a = a.contiguous(); b = b.contiguous(); lut = lut.contiguous();
    const int64_t M = a.size(0), K = a.size(1), N = b.size(0);
    auto out = torch::empty({M, N}, torch::kInt32);
    const uint8_t *A = reinterpret_cast<const uint8_t *>(a.data_ptr<int8_t>());
    const uint8_t *B = reinterpret_cast<const uint8_t *>(b.data_ptr<int8_t>());
    const int32_t *T = lut.data_ptr<int32_t>();
    int32_t *C = out.data_ptr<int32_t>();
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            int32_t acc = 0;
            for (int64_t k = 0; k < K; k++) acc += T[(int32_t)A[m * K + k] * 256 + B[n * K + k]];
            C[m * N + n] = acc;
        }
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("ta_gemm", &ta_gemm, "TorchApprox-style scalar LUT GEMM"); }
