/* The exact OCP FP8 E4M3 multiplier in C: a, b are E4M3 codes (sign, 4 exponent bits, bias 7,
   3 mantissa bits; 0x7f / 0xff NaN, no inf), the result the IEEE binary32 bit pattern of the
   product (exact in float: at most 8 significant bits, 2^-18 .. 2^18). */
#include <math.h>
#include <stdint.h>
#include <string.h>

static float e4m3_value(uint8_t c)
{
    int e = (c >> 3) & 15, m = c & 7;
    float v;
    if (e == 15 && m == 7)
        return NAN;
    v = e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
    return (c & 0x80) ? -v : v;
}

uint32_t e4m3_mul(uint8_t a, uint8_t b)
{
    float p = e4m3_value(a) * e4m3_value(b);
    uint32_t bits;
    memcpy(&bits, &p, sizeof bits);
    return bits;
}
