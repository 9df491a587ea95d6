// Written for lutcore's tests, in EvoApproxLib's header style.  The error figures were
// computed from the circuit's own table; the PDK45 figures are MADE UP for the tests
// (no synthesis was run): they only need to be plausible and ordered.
// MAE% = 0.229 %
// MAE = 150
// WCE% = 1.16 %
// WCE = 759
// WCRE% = 1500.00 %
// EP% = 93.16 %
// MRE% = 12.26 %
// MSE = 38236
// PDK45_PWR = 0.240 mW
// PDK45_AREA = 401.3 um2
// PDK45_DELAY = 1.22 ns
/* Reduced operands: the 2 low bits of each operand cleared before an exact product. */
#include <stdint.h>

int16_t mul8s_ops2(int8_t A, int8_t B) { return (int16_t)((A & ~3) * (B & ~3)); }
