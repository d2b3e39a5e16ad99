// Drawing synapses of the fixed-total-number rule: targets, weights and delays, one pass each.
//
// A plain C function (not an XLA handler), called through ctypes by fixed_total.py while it
// builds a network on the host; ctypes releases the GIL, so the chunks of a build run on
// several threads. The NumPy path made about 25 passes over each chunk (labels, gathers of
// each synapse's pair parameters, redraw masks); here every synapse is one Philox4x32-10 call
// and one pair of normal numbers, written straight into the final arrays.
//
// brainx_fill_synapses(degrees, rows, groups, size, offset, w_mean, w_sd, d_mean, d_sd, d_min,
//                      dt, delay_bytes, key0, key1, targets, delays, weights) -> synapses or < 0
//
//   degrees      int64 (rows, groups): synapses of each row (a source) into each target group
//   size/offset  int64 (groups,): each target group's neurons are offset .. offset + size - 1
//   w_mean/w_sd  float32 (groups,): the weights of this source population's synapses into each
//                group, N(mean, sd) redrawn until the sign is the mean's; w_mean == NULL: no
//                weights (one shared by all)
//   d_*, dt      the delay N(d_mean, d_sd), redrawn below d_min, in steps of dt (halves up, at
//                least 1), written as uint8, uint16 or int32 (delay_bytes 1, 2 or 4)
//   key0/key1    the Philox key of this chunk (the chunk's numbers depend on it alone)
//
// Synapse j of the chunk uses the counters (j, attempt, stream, 0): stream 0 for its target
// and its first weight and delay, 1 for a weight redrawn, 2 for a delay redrawn, 3 and up for
// the polar method's retries. Returns the number written, -1 for a delay too long for its type,
// -2 for a group with no neuron.

#include <cmath>
#include <cstdint>

#include "philox.h"

namespace {


struct Words {
  uint32_t w[4];
};

inline Words Philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t k0, uint32_t k1) {
  Words x{{c0, c1, c2, 0u}};
  brainx_native::Philox4x32(x.w, k0, k1);
  return x;
}

// Two standard normal numbers (Marsaglia's polar method: no sine or cosine, 1.7x faster than
// Box-Muller here). The first try uses the words a and b; a rejected pair (21 % of them) is
// followed by the word pairs of Philox at the counters (j, t, stream), t = 1, 2, ...
inline void Normals(uint32_t a, uint32_t b, uint32_t j, uint32_t stream, uint32_t k0,
                    uint32_t k1, double* z0, double* z1) {
  constexpr double k2m31 = 1.0 / 2147483648.0;
  Words more{};
  for (uint32_t t = 0;; ++t) {
    const double u = static_cast<int32_t>(a) * k2m31, v = static_cast<int32_t>(b) * k2m31;
    const double q = u * u + v * v;
    if (q < 1.0 && q > 0.0) {
      const double f = std::sqrt(-2.0 * std::log(q) / q);
      *z0 = u * f;
      *z1 = v * f;
      return;
    }
    if (t % 2 == 0) {
      more = Philox(j, t / 2 + 1, stream, k0, k1);
      a = more.w[0];
      b = more.w[1];
    } else {
      a = more.w[2];
      b = more.w[3];
    }
  }
}

inline bool WrongSign(float w, float mean) { return mean < 0 ? w > 0 : w < 0; }

}  // namespace

extern "C" int64_t brainx_fill_synapses(const int64_t* degrees, int64_t rows, int64_t groups,
                                        const int64_t* size, const int64_t* offset,
                                        const float* w_mean, const float* w_sd, double d_mean,
                                        double d_sd, double d_min, double dt,
                                        int32_t delay_bytes, uint32_t key0, uint32_t key1,
                                        int32_t* targets, void* delays, float* weights) {
  const int64_t top = delay_bytes == 1 ? 255 : delay_bytes == 2 ? 65535 : 2147483647;
  uint8_t* d8 = static_cast<uint8_t*>(delays);
  uint16_t* d16 = static_cast<uint16_t*>(delays);
  int32_t* d32 = static_cast<int32_t*>(delays);
  int64_t j = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t count = degrees[r * groups + g];
      if (count > 0 && size[g] < 1) return -2;
      const uint64_t n = static_cast<uint64_t>(size[g]);
      for (int64_t s = 0; s < count; ++s, ++j) {
        const uint32_t cj = static_cast<uint32_t>(j);
        Words x = Philox(cj, 0u, 0u, key0, key1);
        // a 64-bit uniform number times the size, its top 64 bits: bias below size / 2^64
        const uint64_t u64 = (static_cast<uint64_t>(x.w[0]) << 32) | x.w[1];
        targets[j] = static_cast<int32_t>(
            offset[g] + static_cast<int64_t>((static_cast<unsigned __int128>(u64) * n) >> 64));
        double zw, zd;
        Normals(x.w[2], x.w[3], cj, 3u, key0, key1, &zw, &zd);
        if (w_mean != nullptr) {
          float w = static_cast<float>(w_mean[g] + static_cast<double>(w_sd[g]) * zw);
          for (uint32_t attempt = 1; WrongSign(w, w_mean[g]); ++attempt) {
            const Words y = Philox(cj, attempt, 1u, key0, key1);
            double z, unused;
            Normals(y.w[0], y.w[1], cj, 4u + 2u * attempt, key0, key1, &z, &unused);
            w = static_cast<float>(w_mean[g] + static_cast<double>(w_sd[g]) * z);
          }
          weights[j] = w;
        }
        double d = d_mean + d_sd * zd;
        for (uint32_t attempt = 1; d < d_min; ++attempt) {
          const Words y = Philox(cj, attempt, 2u, key0, key1);
          double z, unused;
          Normals(y.w[0], y.w[1], cj, 5u + 2u * attempt, key0, key1, &z, &unused);
          d = d_mean + d_sd * z;
        }
        double steps = std::floor(d / dt + 0.5);
        if (steps < 1.0) steps = 1.0;
        if (steps > static_cast<double>(top)) return -1;
        if (delay_bytes == 1)
          d8[j] = static_cast<uint8_t>(steps);
        else if (delay_bytes == 2)
          d16[j] = static_cast<uint16_t>(steps);
        else
          d32[j] = static_cast<int32_t>(steps);
      }
    }
  }
  return j;
}
