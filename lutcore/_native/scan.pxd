# The C interface of csrc/scan/scan.h: declarations only (the paired scan.pyx sees them;
# other modules cimport them; a SIMDe twin includes this file before scan.pyx).
from libc.stdint cimport int64_t

cdef extern from "scan/scan.h" nogil:
    int LC_SCAN_GROUP_UNITS
    const char *lc_scan_body_name(int isa)
    int lc_scan_fwd_f32(float *y, float *ypre, float *hs, float *hlast, const float *u, const float *delta,
                        const float *A, const float *Bm, const float *Cm, const float *Dv, const float *z,
                        const float *dbias, const float *h0, int64_t Bsz, int64_t L, int64_t D, int64_t N,
                        int64_t T, int softplus, int zoh, int isa, int nthreads)
    int lc_scan_fwd_f64(double *y, double *ypre, double *hs, double *hlast, const double *u, const double *delta,
                        const double *A, const double *Bm, const double *Cm, const double *Dv, const double *z,
                        const double *dbias, const double *h0, int64_t Bsz, int64_t L, int64_t D, int64_t N,
                        int64_t T, int softplus, int zoh, int isa, int nthreads)
    int lc_scan_bwd_f32(float *du, float *ddelta, float *dA, float *dB, float *dC, float *dD, float *dz,
                        float *ddb, float *dh0, float *dAp, float *dBp, float *dCp, float *dDp, float *ddbp,
                        const float *dout, const float *u, const float *delta, const float *A,
                        const float *Bm, const float *Cm, const float *Dv, const float *z, const float *dbias,
                        const float *hs, const float *ypre, int64_t Bsz, int64_t L, int64_t D, int64_t N,
                        int64_t T, int softplus, int zoh, int isa, int nthreads)
    int lc_scan_bwd_f64(double *du, double *ddelta, double *dA, double *dB, double *dC, double *dD, double *dz,
                        double *ddb, double *dh0, double *dAp, double *dBp, double *dCp, double *dDp, double *ddbp,
                        const double *dout, const double *u, const double *delta, const double *A,
                        const double *Bm, const double *Cm, const double *Dv, const double *z, const double *dbias,
                        const double *hs, const double *ypre, int64_t Bsz, int64_t L, int64_t D, int64_t N,
                        int64_t T, int softplus, int zoh, int isa, int nthreads)
