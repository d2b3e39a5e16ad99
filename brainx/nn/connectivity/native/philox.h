// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC 2011): a counter-based generator, the one
// of cuRAND and NumPy's Philox. Ten rounds turn a 128-bit counter and a 64-bit key into four
// random words; the same counter and key always give the same words, so numbers can be drawn
// in any order, on any thread. brainx/nn/dynamics/poisson_draws.py has the same in plain JAX
// (tests/test_poisson_draws.py checks both against Random123's known answers).

#ifndef BRAINX_NATIVE_PHILOX_H_
#define BRAINX_NATIVE_PHILOX_H_

#include <cstdint>

namespace brainx_native {

// c: the counter on entry, the four words on return.
inline void Philox4x32(uint32_t c[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1;
    c[1] = static_cast<uint32_t>(p1);
    c[3] = static_cast<uint32_t>(p0);
    c[0] = n0;
    c[2] = n2;
    k0 += kW0;
    k1 += kW1;
  }
}

}  // namespace brainx_native

#endif  // BRAINX_NATIVE_PHILOX_H_
