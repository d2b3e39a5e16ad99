// Event-driven sparse products for XLA's CPU runtime, called as XLA FFI custom calls.
//
// brainx builds this file with the system's C++ compiler on first use
// (brainx/nn/connectivity/native/build.py) and registers the handler below with
// jax.ffi.register_ffi_target; the compiled step then calls it with no Python in between.
//
// `BrainxEventDense` sums the rows of a dense W (..., n_pre, n_post) whose entry of a bool x is
// true (EventLinear). `BrainxEventCsr` computes y = x @ W for a sparse W stored by presynaptic
// row (CSR over the presynaptic neurons):
//
//   x       spikes, (..., n_pre): bool (an event adds the weight) or the weights' float
//           type (a nonzero entry adds x * weight: the float product)
//   w       weights, (..., nnz) one per synapse, or (..., 1) one shared by all
//   indptr  int32 (..., n_pre + 1): row i's synapses are indptr[i] .. indptr[i + 1]
//   post    int32 (..., nnz): each synapse's postsynaptic neuron
//   syn     int32 (..., nnz) or (..., 0): each synapse's place in w (when the weights are
//           stored in another order, e.g. by postsynaptic neuron), empty: w is in row order
//   y       (..., n_post), the weights' type
//
// Only the rows of active presynaptic neurons are read: the cost is the number of
// synapses of the neurons that spiked, plus one pass over x and one over y (and, for the float
// product with zeros in x, one over w: where a weight is inf or nan, a zero x[i] adds
// 0 * w = nan, as x @ W).
// Every offset, target and weight slot is checked where it is read: a layout that is out of
// bounds fails the call with the place, never reads or writes past a buffer.
//
// Leading (batch) axes: x and y carry them; under jax.vmap (vmap_method="expand_dims") every
// operand gets one more in front, of the batch size or 1. An operand's leading axes line up
// with y's from the left, and an axis of size 1 is shared by every batch entry.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "xla/ffi/api/ffi.h"
#include "batch_index.h"

namespace ffi = xla::ffi;

namespace {

using brainx_native::BatchIndex;

// Calls visit(i, x[i]) for each i < n with x[i] true (nonzero), eight bools tested at a time;
// stops at the first visit that returns false.
template <typename Visit>
inline bool ForEachEvent(const bool* x, int64_t n, Visit&& visit) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, x + i, sizeof(word));
    if (word == 0) continue;
    for (int64_t j = i; j < i + 8; ++j)
      if (x[j] && !visit(j, true)) return false;
  }
  for (; i < n; ++i)
    if (x[i] && !visit(i, true)) return false;
  return true;
}

template <typename T, typename Visit>
inline bool ForEachEvent(const T* x, int64_t n, Visit&& visit) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] != T(0) && !visit(i, x[i])) return false;
  return true;
}

// What a product found wrong in the connectivity it was given: the kernel stops there, before
// any read or write out of bounds, and the call fails with the place (Python builds only valid
// layouts, SynapseRows; this guards against one built or changed by other means).
struct Fault {
  const char* what = nullptr;   // nullptr: none
  int64_t where = 0;            // the row (indptr) or the synapse (post, syn)
  int64_t value = 0;
};

// Whether v is inf or nan: its exponent bits all set (an integer test, so loops of it vectorize).
inline bool Nonfinite(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return (bits & 0x7f800000u) == 0x7f800000u;
}

inline bool Nonfinite(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
}

template <typename W>
bool AnyNonfinite(const W* w, int64_t n) {
  int any = 0;
  for (int64_t p = 0; p < n; ++p) any |= Nonfinite(w[p]);
  return any != 0;
}

// Adds the synapses lo .. hi of one row (scaled by xi unless X is bool) into y, each target and
// slot checked before it is used; `kOnlyNonfinite`: only the weights that are inf or nan.
template <typename W, typename X, bool kShared, bool kIndirect, bool kOnlyNonfinite>
bool AddRow(int64_t lo, int64_t hi, X xi, const W* w, int64_t n_w, const int32_t* post,
            const int32_t* syn, W* y, int64_t n_post, Fault* fault) {
  for (int64_t p = lo; p < hi; ++p) {
    int64_t slot = p;
    if constexpr (kIndirect) {
      slot = syn[p];
      if (static_cast<uint64_t>(slot) >= static_cast<uint64_t>(n_w)) {
        *fault = {"syn", p, slot};
        return false;
      }
    }
    const W wp = kShared ? w[0] : w[slot];
    if (kOnlyNonfinite && !Nonfinite(wp)) continue;
    const int64_t t = post[p];
    if (static_cast<uint64_t>(t) >= static_cast<uint64_t>(n_post)) {
      *fault = {"post", p, t};
      return false;
    }
    if constexpr (std::is_same<X, bool>::value) {
      y[t] += wp;
    } else {
      y[t] += static_cast<W>(xi) * wp;
    }
  }
  return true;
}

// One batch entry: y = x @ W over the rows of the active entries of x. `kShared`: one weight
// w[0] for all; `kIndirect`: synapse p's weight is w[syn[p]], else w[p]. The offsets are
// checked first, all of them (a pass as long as the one over x); each target and slot where it
// is read. For the float product (X = W) a zero entry x[i] also adds 0 * w for its row's
// weights that are inf or nan: IEEE over the stored synapses, as x @ W. Only when x has zeros
// are the weights scanned for those (one contiguous pass; a dense x visits every row anyway).
template <typename W, typename X, bool kShared, bool kIndirect>
Fault ProductRow(const X* x, int64_t n_pre, const W* w, int64_t n_w, const int32_t* indptr, const int32_t* post, const int32_t* syn, int64_t nnz,
                 W* y, int64_t n_post) {
  std::memset(y, 0, sizeof(W) * n_post);
  Fault fault;
  if (indptr[0] != 0) return Fault{"indptr", 0, indptr[0]};
  for (int64_t i = 0; i < n_pre; ++i)
    if (indptr[i + 1] < indptr[i] || indptr[i + 1] > nnz)
      return Fault{"indptr", i + 1, indptr[i + 1]};
  int64_t visited = 0;
  const bool done = ForEachEvent(x, n_pre, [&](int64_t i, X xi) {
    ++visited;
    return AddRow<W, X, kShared, kIndirect, false>(indptr[i], indptr[i + 1], xi, w, n_w, post,
                                                   syn, y, n_post, &fault);
  });
  if (!done) return fault;
  if constexpr (!std::is_same<X, bool>::value) {
    if (visited < n_pre && AnyNonfinite(w, n_w))
      for (int64_t i = 0; i < n_pre; ++i)
        if (x[i] == X(0) && !AddRow<W, X, kShared, kIndirect, true>(
                                indptr[i], indptr[i + 1], X(0), w, n_w, post, syn, y, n_post,
                                &fault))
          return fault;
  }
  return fault;
}

// The leading (batch) axes of a buffer whose own axes are its last `base` ones.
ffi::Span<const int64_t> Lead(const ffi::AnyBuffer& b, size_t base = 1) {
  auto dims = b.dimensions();
  return dims.first(dims.size() - base);
}

ffi::Error CheckLead(const char* who, const char* name, ffi::Span<const int64_t> lead,
                     ffi::Span<const int64_t> out_lead) {
  if (lead.size() > out_lead.size())
    return ffi::Error::InvalidArgument(std::string(who) + ": " + name +
                                       " has more leading axes than the output");
  for (size_t d = 0; d < lead.size(); ++d)
    if (lead[d] != 1 && lead[d] != out_lead[d])
      return ffi::Error::InvalidArgument(std::string(who) + ": " + name +
                                         "'s leading axes do not match the output's");
  return ffi::Error::Success();
}

template <typename W, typename X>
ffi::Error Product(ffi::AnyBuffer x, ffi::AnyBuffer w, ffi::AnyBuffer indptr, ffi::AnyBuffer post,
                   ffi::AnyBuffer syn, ffi::Result<ffi::AnyBuffer> y) {
  const auto out_lead = Lead(*y);
  const int64_t n_post = y->dimensions().back();
  const int64_t n_pre = x.dimensions().back();
  const int64_t n_w = w.dimensions().back();
  const int64_t nnz = post.dimensions().back();
  const bool shared = n_w == 1;
  const bool indirect = syn.dimensions().back() > 0;
  if (indptr.dimensions().back() != n_pre + 1)
    return ffi::Error::InvalidArgument("BrainxEventCsr: indptr must have n_pre + 1 entries");
  if (!shared && n_w != nnz)
    return ffi::Error::InvalidArgument("BrainxEventCsr: one weight per synapse, or one in all");
  if (indirect && syn.dimensions().back() != nnz)
    return ffi::Error::InvalidArgument("BrainxEventCsr: syn must have one entry per synapse");
  const ffi::AnyBuffer* operands[] = {&x, &w, &indptr, &post, &syn};
  const char* names[] = {"x", "w", "indptr", "post", "syn"};
  for (int k = 0; k < 5; ++k)
    if (auto error = CheckLead("BrainxEventCsr", names[k], Lead(*operands[k]), out_lead);
        error.failure())
      return error;

  int64_t n_batch = 1;
  for (int64_t d : out_lead) n_batch *= d;
  const BatchIndex xi(Lead(x), n_pre, out_lead), wi(Lead(w), n_w, out_lead),
      pi(Lead(indptr), n_pre + 1, out_lead), qi(Lead(post), nnz, out_lead),
      si(Lead(syn), syn.dimensions().back(), out_lead);
  const X* xs = x.typed_data<X>();
  const W* ws = w.typed_data<W>();
  const int32_t* ps = indptr.typed_data<int32_t>();
  const int32_t* qs = post.typed_data<int32_t>();
  const int32_t* ss = indirect ? syn.typed_data<int32_t>() : nullptr;
  W* ys = y->typed_data<W>();
  auto product = shared     ? ProductRow<W, X, true, false>
                 : indirect ? ProductRow<W, X, false, true>
                            : ProductRow<W, X, false, false>;
  for (int64_t b = 0; b < n_batch; ++b) {
    const Fault fault = product(xs + xi.Offset(b, out_lead), n_pre, ws + wi.Offset(b, out_lead),
                                n_w, ps + pi.Offset(b, out_lead), qs + qi.Offset(b, out_lead),
                                indirect ? ss + si.Offset(b, out_lead) : nullptr, nnz,
                                ys + b * n_post, n_post);
    if (fault.what != nullptr) {
      const std::string place = std::string(fault.what) + "[" + std::to_string(fault.where) +
                                "] = " + std::to_string(fault.value);
      const std::string bound = std::string(fault.what) == "indptr"
                                    ? "offsets must rise from 0 to the " + std::to_string(nnz) +
                                          " synapses"
                                : std::string(fault.what) == "post"
                                    ? "targets must lie in [0, " + std::to_string(n_post) + ")"
                                    : "weight slots must lie in [0, " + std::to_string(n_w) + ")";
      return ffi::Error::InvalidArgument(
          "BrainxEventCsr: the connectivity is out of bounds: " + place + " (" + bound +
          "); build it with SynapseRows.fixed, .compressed or .coordinates");
    }
  }
  return ffi::Error::Success();
}

ffi::Error EventCsr(ffi::AnyBuffer x, ffi::AnyBuffer w, ffi::AnyBuffer indptr, ffi::AnyBuffer post,
                    ffi::AnyBuffer syn, ffi::Result<ffi::AnyBuffer> y) {
  for (const ffi::AnyBuffer* b : {&x, &w, &indptr, &post, &syn})
    if (b->dimensions().size() == 0)
      return ffi::Error::InvalidArgument("BrainxEventCsr: every operand needs at least one axis");
  if (y->dimensions().size() == 0)
    return ffi::Error::InvalidArgument("BrainxEventCsr: the output needs at least one axis");
  if (indptr.element_type() != ffi::S32 || post.element_type() != ffi::S32 ||
      syn.element_type() != ffi::S32)
    return ffi::Error::InvalidArgument("BrainxEventCsr: indptr, post and syn must be int32");
  const auto wt = w.element_type();
  if (y->element_type() != wt)
    return ffi::Error::InvalidArgument("BrainxEventCsr: the output must have the weights' type");
  const auto xt = x.element_type();
  if (xt != ffi::PRED && xt != wt)
    return ffi::Error::InvalidArgument("BrainxEventCsr: x must be bool or the weights' type");
  if (wt == ffi::F32)
    return xt == ffi::PRED ? Product<float, bool>(x, w, indptr, post, syn, y)
                           : Product<float, float>(x, w, indptr, post, syn, y);
  if (wt == ffi::F64)
    return xt == ffi::PRED ? Product<double, bool>(x, w, indptr, post, syn, y)
                           : Product<double, double>(x, w, indptr, post, syn, y);
  return ffi::Error::InvalidArgument("BrainxEventCsr: weights must be float32 or float64");
}

// y = events(x) @ W for a dense W (n_pre, n_post): the rows of the active entries, summed.
template <typename W>
ffi::Error DenseProduct(ffi::AnyBuffer x, ffi::AnyBuffer w, ffi::Result<ffi::AnyBuffer> y) {
  const auto out_lead = Lead(*y);
  const int64_t n_post = y->dimensions().back();
  const int64_t n_pre = x.dimensions().back();
  const auto wdims = w.dimensions();
  if (wdims.size() < 2 || wdims[wdims.size() - 2] != n_pre || wdims.back() != n_post)
    return ffi::Error::InvalidArgument("BrainxEventDense: w must be (..., n_pre, n_post)");
  if (auto e = CheckLead("BrainxEventDense", "x", Lead(x), out_lead); e.failure()) return e;
  if (auto e = CheckLead("BrainxEventDense", "w", Lead(w, 2), out_lead); e.failure()) return e;
  int64_t n_batch = 1;
  for (int64_t d : out_lead) n_batch *= d;
  const BatchIndex xi(Lead(x), n_pre, out_lead), wi(Lead(w, 2), n_pre * n_post, out_lead);
  const bool* xs = x.typed_data<bool>();
  const W* ws = w.typed_data<W>();
  W* ys = y->typed_data<W>();
  for (int64_t b = 0; b < n_batch; ++b) {
    W* row_out = ys + b * n_post;
    const W* wb = ws + wi.Offset(b, out_lead);
    std::memset(row_out, 0, sizeof(W) * n_post);
    ForEachEvent(xs + xi.Offset(b, out_lead), n_pre, [&](int64_t i, bool) {
      const W* row = wb + i * n_post;
      for (int64_t j = 0; j < n_post; ++j) row_out[j] += row[j];
      return true;
    });
  }
  return ffi::Error::Success();
}

ffi::Error EventDense(ffi::AnyBuffer x, ffi::AnyBuffer w, ffi::Result<ffi::AnyBuffer> y) {
  if (x.dimensions().size() == 0 || y->dimensions().size() == 0)
    return ffi::Error::InvalidArgument("BrainxEventDense: x and y need at least one axis");
  if (x.element_type() != ffi::PRED)
    return ffi::Error::InvalidArgument("BrainxEventDense: x must be bool");
  if (y->element_type() != w.element_type())
    return ffi::Error::InvalidArgument("BrainxEventDense: the output must have w's type");
  if (w.element_type() == ffi::F32) return DenseProduct<float>(x, w, y);
  if (w.element_type() == ffi::F64) return DenseProduct<double>(x, w, y);
  return ffi::Error::InvalidArgument("BrainxEventDense: w must be float32 or float64");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(BrainxEventCsr, EventCsr,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()  // x
                                  .Arg<ffi::AnyBuffer>()  // w
                                  .Arg<ffi::AnyBuffer>()  // indptr
                                  .Arg<ffi::AnyBuffer>()  // post
                                  .Arg<ffi::AnyBuffer>()  // syn
                                  .Ret<ffi::AnyBuffer>()  // y
);

XLA_FFI_DEFINE_HANDLER_SYMBOL(BrainxEventDense, EventDense,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()  // x, bool (..., n_pre)
                                  .Arg<ffi::AnyBuffer>()  // w (..., n_pre, n_post)
                                  .Ret<ffi::AnyBuffer>()  // y (..., n_post)
);
