// Written for lutcore's tests, in EvoApproxLib's header style.  The error figures were
// computed from the circuit's own table; the PDK45 figures are MADE UP for the tests
// (no synthesis was run): they only need to be plausible and ordered.
// MAE% = 0.019 %
// MAE = 12
// WCE% = 0.07 %
// WCE = 49
// WCRE% = 4900.00 %
// EP% = 81.25 %
// MRE% = 2.53 %
// MSE = 248
// PDK45_PWR = 0.338 mW
// PDK45_AREA = 562.7 um2
// PDK45_DELAY = 1.36 ns
/* The signed array multiplier (Baugh-Wooley) with its 4 lowest partial-product columns
   dropped, summed modulo 2^16. */
#include <stdint.h>

static int16_t array_mul(int8_t a, int8_t b, int k) {
    uint8_t ua = (uint8_t)a, ub = (uint8_t)b;
    uint32_t sum = 0x8100u;
    for (int j = 0; j < 8; ++j)
        for (int i = 0; i < 8; ++i) {
            if (i + j < k) continue;
            uint32_t bit = ((ua >> i) & 1u) & ((ub >> j) & 1u);
            if ((i == 7) != (j == 7)) bit ^= 1u;
            sum += bit << (i + j);
        }
    return (int16_t)(uint16_t)(sum & 0xffffu);
}

int16_t mul8s_trunc4(int8_t A, int8_t B) { return array_mul(A, B, 4); }
