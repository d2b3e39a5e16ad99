// Poisson counts for XLA's CPU runtime: one Philox4x32-10 number per neuron, then the inverse CDF.
//
// Built into the same library as event_kernels.cc (build.py compiles every .cc of this folder)
// and registered as the FFI target brainx_poisson_counts. On CPU, XLA's own generators cost
// about 60 ns a number (threefry, fused into long integer chains); a step of the cortical
// microcircuit draws 77 169 of them, which was two thirds of the step. This kernel draws the
// same numbers as brainx's plain-JAX Philox (brainx/nn/dynamics/poisson_draws.py), bit for bit.
//
// `BrainxPoissonCounts(key, table, group, start) -> counts`:
//
//   key     uint32 (..., 2): the Philox key of this call (a fresh one per step)
//   table   float32 (groups, cap): row g holds F_g(0), ..., F_g(cap - 1), the distribution
//           function of group g's Poisson law (nondecreasing)
//   group   int32 (n,): each neuron's row of the table
//   start   int32 (1,): the index of the first number (a device's block of a network
//           partitioned over devices: its first neuron), >= 0
//   counts  int32 (..., m), m a multiple of n: entry j is #{k < cap : U_{start+j} >= F_g(k)}
//           with g = group[j mod n] and U_i the i-th uniform number of the key
//
// The i-th uniform number is word i mod 4 of Philox4x32-10 (Salmon et al., SC 2011) at the
// counter (i div 4, 0, 0, 0), its top 24 bits times 2^-24: a float32 in [0, 1) with every
// value exact. Leading axes (one key per batch entry under jax.vmap, vmap_method
// "expand_dims") are the key's; the table and the groups are shared (leading axes of size 1).
// Every group index is checked before it is read. The numbers are drawn in tasks of 8192 on
// XLA's intra-op threads (parallel_for.h); each is a function of its index, so the counts do
// not depend on the threads.

#include <algorithm>
#include <cstdint>
#include <string>

#include "parallel_for.h"
#include "philox.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using brainx_native::Philox4x32;

// #{k < cap : u >= row[k]} of a nondecreasing row, without branches on u: an early-exit search
// mispredicts about once a number (it cost 4x the Philox numbers); a short row is counted whole,
// a long one searched by halves with conditional moves.
inline int32_t CountBelow(const float* row, int64_t cap, float u) {
  if (cap <= 32) {
    int32_t k = 0;
    for (int64_t q = 0; q < cap; ++q) k += u >= row[q];
    return k;
  }
  const float* base = row;
  for (int64_t len = cap; len > 1;) {
    const int64_t half = len / 2;
    base = base[half - 1] <= u ? base + half : base;
    len -= half;
  }
  return static_cast<int32_t>(base - row) + (*base <= u);
}

bool OnlyOnes(ffi::Span<const int64_t> dims, size_t keep) {
  for (size_t d = 0; d + keep < dims.size(); ++d)
    if (dims[d] != 1) return false;
  return true;
}

ffi::Error PoissonCounts(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> key, ffi::Buffer<ffi::F32> table,
                         ffi::Buffer<ffi::S32> group, ffi::Buffer<ffi::S32> start,
                         ffi::ResultBuffer<ffi::S32> out) {
  const auto kd = key.dimensions(), td = table.dimensions(), gd = group.dimensions();
  const auto od = out->dimensions();
  if (kd.size() < 1 || kd.back() != 2)
    return ffi::Error::InvalidArgument("BrainxPoissonCounts: the key must be uint32 (..., 2)");
  if (td.size() < 2 || gd.size() < 1 || od.size() < 1)
    return ffi::Error::InvalidArgument(
        "BrainxPoissonCounts: table (groups, cap), group (n,) and counts (..., m) expected");
  if (!OnlyOnes(td, 2) || !OnlyOnes(gd, 1))
    return ffi::Error::InvalidArgument(
        "BrainxPoissonCounts: the table and the groups cannot be batched");
  const int64_t groups = td[td.size() - 2], cap = td.back(), n = gd.back(), m = od.back();
  if (n < 1 || m % n != 0)
    return ffi::Error::InvalidArgument("BrainxPoissonCounts: counts must hold whole populations");
  int64_t batch = 1;
  for (size_t d = 0; d + 1 < od.size(); ++d) batch *= od[d];
  if (key.element_count() != 2 * batch)
    return ffi::Error::InvalidArgument("BrainxPoissonCounts: one key per batch entry");
  const int32_t* g = group.typed_data();
  for (int64_t i = 0; i < n; ++i)
    if (g[i] < 0 || g[i] >= groups)
      return ffi::Error::InvalidArgument("BrainxPoissonCounts: neuron " + std::to_string(i) +
                                         " has group " + std::to_string(g[i]) + ", outside [0, " +
                                         std::to_string(groups) + ")");
  if (start.element_count() != 1 || start.typed_data()[0] < 0)
    return ffi::Error::InvalidArgument("BrainxPoissonCounts: start must be one int32 >= 0");
  const int64_t origin = start.typed_data()[0];
  const float* F = table.typed_data();
  const uint32_t* keys = key.typed_data();
  int32_t* counts = out->typed_data();
  // tasks of kTask numbers (whole Philox blocks), over every batch entry
  constexpr int64_t kTask = 8192;
  const int64_t per_entry = (m + kTask - 1) / kTask;
  brainx_native::ParallelFor(pool, batch * per_entry, brainx_native::Workers(pool),
                             [&](int64_t task) {
    const int64_t b = task / per_entry;
    const int64_t first = (task % per_entry) * kTask;
    const int64_t last = std::min(m, first + kTask);
    const uint32_t k0 = keys[2 * b], k1 = keys[2 * b + 1];
    int32_t* cb = counts + b * m;
    int64_t neuron = first % n;  // j mod n, kept as it goes (a division a number costs more)
    const int64_t lo = origin + first, hi = origin + last;  // the numbers' indices
    for (int64_t block = lo / 4; block * 4 < hi; ++block) {
      uint32_t c[4] = {static_cast<uint32_t>(block), 0u, 0u, 0u};
      Philox4x32(c, k0, k1);
      for (int64_t w = 0; w < 4; ++w) {
        const int64_t i = block * 4 + w;
        if (i < lo) continue;
        if (i >= hi) break;
        const float u = static_cast<float>(c[w] >> 8) * (1.0f / 16777216.0f);
        cb[i - origin] = CountBelow(F + static_cast<int64_t>(g[neuron]) * cap, cap, u);
        if (++neuron == n) neuron = 0;
      }
    }
  });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(BrainxPoissonCounts, PoissonCounts,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()        // XLA's intra-op threads
                                  .Arg<ffi::Buffer<ffi::U32>>()  // key (..., 2)
                                  .Arg<ffi::Buffer<ffi::F32>>()  // table (groups, cap)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // group (n,)
                                  .Arg<ffi::Buffer<ffi::S32>>()  // start (1,)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // counts (..., m)
);
