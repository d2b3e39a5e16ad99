// Per-synapse delays for XLA's CPU runtime: spikes delivered into a postsynaptic ring buffer.
//
// Built into the same library as event_kernels.cc (build.py compiles every .cc of this folder)
// and registered as the FFI target brainx_delayed_csr. NEST's scheme: every postsynaptic
// neuron has a ring buffer of `slots` = max_delay + 1 entries; a spike of step k over a synapse
// of delay d (1 <= d <= max_delay steps) adds its weight into slot (k + d) mod slots, and the
// slot of step k is what the neuron receives in step k (read by the caller, then cleared here).
//
// `BrainxDelayedCsr(buffer, x, w, indptr, post, delay, step) -> (buffer', next)`:
//
//   buffer  (..., slots, n_post), the weights' float type; aliased to the output, so inside a
//           compiled loop the update is in place
//   x       spikes of step k, (..., n_pre): bool (an event adds the weight) or the weights' type
//           (a nonzero entry adds x * weight)
//   w       (..., nnz) one weight per synapse, or (..., 1) one shared by all
//   indptr  int32 (..., n_pre + 1): row i's synapses are indptr[i] .. indptr[i + 1]
//   post    int32 (..., nnz): each synapse's postsynaptic neuron
//   delay   (..., nnz) uint8, uint16, int16 or int32: each synapse's delay in steps
//   step    int32 (..., 1): k
//   next    (..., n_post): slot (k + 1) mod slots of buffer', the input of step k + 1
//
// The kernel first clears slot k mod slots (its content was this step's input), then adds the
// rows of the active presynaptic neurons and copies out the slot of the next step. Reading that
// slot here, not in the caller, keeps the buffer's only user the kernel: XLA then updates it in
// place inside a loop (a read of the buffer beside an aliased call makes it copy the buffer).
// Every target and delay is checked before it is written (targets in [0, n_post), delays in
// [1, slots - 1]); a bad one is skipped and the call fails with the count of bad synapses,
// so no write ever leaves the buffer.
//
// Leading (batch) axes follow event_kernels.cc: under jax.vmap (vmap_method="expand_dims") every
// operand gets an axis in front, of the batch size or 1 (shared by every batch entry).

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "xla/ffi/api/ffi.h"
#include "batch_index.h"
#include "parallel_for.h"

namespace ffi = xla::ffi;

namespace {

using brainx_native::BatchIndex;

// Populations of at least this many neurons have their targets split between threads.
constexpr int64_t kSplitTargets = 16384;

ffi::Span<const int64_t> LeadOf(const ffi::AnyBuffer& b, size_t base) {
  auto dims = b.dimensions();
  return dims.first(dims.size() - base);
}

ffi::Error CheckLeadAxes(const char* name, ffi::Span<const int64_t> lead,
                         ffi::Span<const int64_t> out_lead) {
  if (lead.size() > out_lead.size())
    return ffi::Error::InvalidArgument(std::string("BrainxDelayedCsr: ") + name +
                                       " has more leading axes than the buffer");
  for (size_t d = 0; d < lead.size(); ++d)
    if (lead[d] != 1 && lead[d] != out_lead[d])
      return ffi::Error::InvalidArgument(std::string("BrainxDelayedCsr: ") + name +
                                         "'s leading axes do not match the buffer's");
  return ffi::Error::Success();
}

// One batch entry's active rows, written only into the targets [lo, hi): the buffer split
// by target between threads, so no two write one place (each reads every active synapse; the
// writes, which miss the cache, are what is shared). Returns the number of synapses skipped
// for a bad delay (among [lo, hi)) or, when lo == 0, a target outside [0, n_post).
template <typename W, typename X, typename D>
int64_t DeliverRows(W* buf, int64_t slots, int64_t n_post, const X* x, int64_t n_pre,
                    const W* w, bool shared, const int32_t* indptr, const int32_t* post,
                    const D* delay, int64_t now, int64_t lo, int64_t hi) {
  constexpr bool kEvents = std::is_same<X, bool>::value;
  const uint64_t max_delay = static_cast<uint64_t>(slots - 1);
  const uint64_t n = static_cast<uint64_t>(n_post);
  const uint64_t ulo = static_cast<uint64_t>(lo), width = static_cast<uint64_t>(hi - lo);
  int64_t bad = 0;
  for (int64_t i = 0; i < n_pre; ++i) {
    if (x[i] == X(0)) continue;
    const W scale = kEvents ? W(1) : static_cast<W>(x[i]);
    for (int32_t p = indptr[i]; p < indptr[i + 1]; ++p) {
      const uint64_t t = static_cast<uint64_t>(static_cast<int64_t>(post[p]));
      if (t - ulo >= width) {               // not this thread's (or outside [0, n_post))
        bad += (lo == 0 && t >= n);
        continue;
      }
      const uint64_t d = static_cast<uint64_t>(static_cast<int64_t>(delay[p]));
      if (d - 1 >= max_delay) {             // d == 0 wraps to a huge value: refused too
        ++bad;
        continue;
      }
      int64_t slot = now + static_cast<int64_t>(d);
      if (slot >= slots) slot -= slots;
      const W add = shared ? w[0] : w[p];
      buf[slot * n_post + static_cast<int64_t>(t)] += kEvents ? add : scale * add;
    }
  }
  return bad;
}

template <typename W, typename X, typename D>
ffi::Error Deliver(ffi::ThreadPool& pool, ffi::AnyBuffer buffer, ffi::AnyBuffer x, ffi::AnyBuffer w,
                   ffi::AnyBuffer indptr, ffi::AnyBuffer post, ffi::AnyBuffer delay,
                   ffi::AnyBuffer step, ffi::Result<ffi::AnyBuffer> out,
                   ffi::Result<ffi::AnyBuffer> next) {
  const auto out_lead = LeadOf(*out, 2);
  const auto odims = out->dimensions();
  const int64_t slots = odims[odims.size() - 2];
  const int64_t n_post = odims.back();
  const int64_t n_pre = x.dimensions().back();
  const int64_t nnz = post.dimensions().back();
  const int64_t n_w = w.dimensions().back();
  const bool shared = n_w == 1;
  if (slots < 2)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: the buffer needs at least 2 slots");
  const auto bdims = buffer.dimensions();
  if (bdims.size() < 2 || bdims[bdims.size() - 2] != slots || bdims.back() != n_post)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: buffer and output differ in shape");
  if (indptr.dimensions().back() != n_pre + 1)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: indptr must have n_pre + 1 entries");
  if (!shared && n_w != nnz)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: one weight per synapse, or one in all");
  if (delay.dimensions().back() != nnz)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: one delay per synapse");
  if (next->dimensions().back() != n_post || next->element_count() * slots != out->element_count())
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: next must be (..., n_post)");
  if (step.dimensions().back() != 1)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: step must be (..., 1)");
  if (auto e = CheckLeadAxes("buffer", LeadOf(buffer, 2), out_lead); e.failure()) return e;
  const ffi::AnyBuffer* operands[] = {&x, &w, &indptr, &post, &delay, &step};
  const char* names[] = {"x", "w", "indptr", "post", "delay", "step"};
  for (int k = 0; k < 6; ++k)
    if (auto e = CheckLeadAxes(names[k], LeadOf(*operands[k], 1), out_lead); e.failure())
      return e;

  int64_t n_batch = 1;
  for (int64_t d : out_lead) n_batch *= d;
  const int64_t block = slots * n_post;
  const BatchIndex bi(LeadOf(buffer, 2), block, out_lead), xi(LeadOf(x, 1), n_pre, out_lead),
      wi(LeadOf(w, 1), n_w, out_lead), pi(LeadOf(indptr, 1), n_pre + 1, out_lead),
      qi(LeadOf(post, 1), nnz, out_lead), di(LeadOf(delay, 1), nnz, out_lead),
      si(LeadOf(step, 1), 1, out_lead);
  const W* in = buffer.typed_data<W>();
  W* ys = out->typed_data<W>();
  W* ns = next->typed_data<W>();
  // large populations: the targets split between XLA's intra-op threads
  const int64_t parts = n_post >= kSplitTargets ? brainx_native::Workers(pool) : 1;
  std::atomic<int64_t> bad{0};
  for (int64_t b = 0; b < n_batch; ++b) {
    W* yb = ys + b * block;
    const W* ib = in + bi.Offset(b, out_lead);
    if (ib != yb) std::memcpy(yb, ib, sizeof(W) * block);   // not aliased (or broadcast)
    const int64_t k = static_cast<int64_t>(step.typed_data<int32_t>()[si.Offset(b, out_lead)]);
    int64_t now = k % slots;
    if (now < 0) now += slots;
    std::memset(yb + now * n_post, 0, sizeof(W) * n_post);  // its content was this step's input
    const X* xb = x.typed_data<X>() + xi.Offset(b, out_lead);
    const W* wb = w.typed_data<W>() + wi.Offset(b, out_lead);
    const int32_t* pb = indptr.typed_data<int32_t>() + pi.Offset(b, out_lead);
    const int32_t* qb = post.typed_data<int32_t>() + qi.Offset(b, out_lead);
    const D* db = delay.typed_data<D>() + di.Offset(b, out_lead);
    brainx_native::ParallelFor(pool, parts, parts, [&](int64_t part) {
      const int64_t lo = n_post * part / parts, hi = n_post * (part + 1) / parts;
      bad += DeliverRows<W, X, D>(yb, slots, n_post, xb, n_pre, wb, shared, pb, qb, db, now, lo,
                                  hi);
    });
    int64_t after = (k + 1) % slots;
    if (after < 0) after += slots;
    std::memcpy(ns + b * n_post, yb + after * n_post, sizeof(W) * n_post);
  }
  if (bad.load() > 0)
    return ffi::Error::InvalidArgument(
        "BrainxDelayedCsr: " + std::to_string(bad.load()) + " synapse(s) have a target outside [0, " +
        std::to_string(n_post) + ") or a delay outside [1, " + std::to_string(slots - 1) +
        "] steps; they were not delivered");
  return ffi::Error::Success();
}

template <typename W, typename X>
ffi::Error ByDelayType(ffi::ThreadPool& pool, ffi::AnyBuffer buffer, ffi::AnyBuffer x, ffi::AnyBuffer w,
                       ffi::AnyBuffer indptr, ffi::AnyBuffer post, ffi::AnyBuffer delay,
                       ffi::AnyBuffer step, ffi::Result<ffi::AnyBuffer> out,
                       ffi::Result<ffi::AnyBuffer> next) {
  switch (delay.element_type()) {
    case ffi::U8:
      return Deliver<W, X, uint8_t>(pool, buffer, x, w, indptr, post, delay, step, out, next);
    case ffi::U16:
      return Deliver<W, X, uint16_t>(pool, buffer, x, w, indptr, post, delay, step, out, next);
    case ffi::S16:
      return Deliver<W, X, int16_t>(pool, buffer, x, w, indptr, post, delay, step, out, next);
    case ffi::S32:
      return Deliver<W, X, int32_t>(pool, buffer, x, w, indptr, post, delay, step, out, next);
    default:
      return ffi::Error::InvalidArgument(
          "BrainxDelayedCsr: delays must be uint8, uint16, int16 or int32");
  }
}

ffi::Error DelayedCsr(ffi::ThreadPool pool, ffi::AnyBuffer buffer, ffi::AnyBuffer x, ffi::AnyBuffer w,
                      ffi::AnyBuffer indptr, ffi::AnyBuffer post, ffi::AnyBuffer delay,
                      ffi::AnyBuffer step, ffi::Result<ffi::AnyBuffer> out,
                      ffi::Result<ffi::AnyBuffer> next) {
  if (out->dimensions().size() < 2 || buffer.dimensions().size() < 2)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: the buffer must be (..., slots, n_post)");
  for (const ffi::AnyBuffer* b : {&x, &w, &indptr, &post, &delay, &step})
    if (b->dimensions().size() == 0)
      return ffi::Error::InvalidArgument("BrainxDelayedCsr: every operand needs at least one axis");
  if (indptr.element_type() != ffi::S32 || post.element_type() != ffi::S32 ||
      step.element_type() != ffi::S32)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: indptr, post and step must be int32");
  const auto wt = w.element_type();
  if (out->element_type() != wt || buffer.element_type() != wt || next->element_type() != wt)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: the buffer must have the weights' type");
  const auto xt = x.element_type();
  if (xt != ffi::PRED && xt != wt)
    return ffi::Error::InvalidArgument("BrainxDelayedCsr: x must be bool or the weights' type");
  if (wt == ffi::F32)
    return xt == ffi::PRED
               ? ByDelayType<float, bool>(pool, buffer, x, w, indptr, post, delay, step, out, next)
               : ByDelayType<float, float>(pool, buffer, x, w, indptr, post, delay, step, out, next);
  if (wt == ffi::F64)
    return xt == ffi::PRED
               ? ByDelayType<double, bool>(pool, buffer, x, w, indptr, post, delay, step, out, next)
               : ByDelayType<double, double>(pool, buffer, x, w, indptr, post, delay, step, out, next);
  return ffi::Error::InvalidArgument("BrainxDelayedCsr: weights must be float32 or float64");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(BrainxDelayedCsr, DelayedCsr,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()  // XLA's intra-op threads
                                  .Arg<ffi::AnyBuffer>()  // buffer (..., slots, n_post)
                                  .Arg<ffi::AnyBuffer>()  // x (..., n_pre)
                                  .Arg<ffi::AnyBuffer>()  // w (..., nnz) or (..., 1)
                                  .Arg<ffi::AnyBuffer>()  // indptr int32 (..., n_pre + 1)
                                  .Arg<ffi::AnyBuffer>()  // post int32 (..., nnz)
                                  .Arg<ffi::AnyBuffer>()  // delay (..., nnz)
                                  .Arg<ffi::AnyBuffer>()  // step int32 (..., 1)
                                  .Ret<ffi::AnyBuffer>()  // buffer' (aliased to buffer)
                                  .Ret<ffi::AnyBuffer>()  // next (..., n_post)
);
