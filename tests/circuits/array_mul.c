/* A bit-accurate C model of array_mul.v: the same Baugh-Wooley partial
   products, the K lowest columns dropped, summed modulo 2^16. */
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

int16_t mul8_exact(int8_t a, int8_t b) { return array_mul(a, b, 0); }

int16_t mul8_trunc4(int8_t a, int8_t b) { return array_mul(a, b, 4); }
