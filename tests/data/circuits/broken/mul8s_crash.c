// Deliberately broken (for the tests): the model dereferences NULL at A = 77.
// PDK45_PWR = 0.100 mW
#include <stdint.h>
#include <stddef.h>

int16_t mul8s_crash(int8_t A, int8_t B) {
    volatile int16_t *p = NULL;
    if (A == 77) return *p;
    return (int16_t)(A * B);
}
