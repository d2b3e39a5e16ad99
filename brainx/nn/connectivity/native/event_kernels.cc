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
// synapses of the neurons that spiked, plus one pass over x and one over y.
//
// Leading (batch) axes: x and y carry them; under jax.vmap (vmap_method="expand_dims") every
// operand gets one more in front, of the batch size or 1. An operand's leading axes line up
// with y's from the left, and an axis of size 1 is shared by every batch entry.

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Where one operand's batch entry starts, for each batch entry of the output.
class BatchIndex {
 public:
  // `lead` is the operand's leading axes, `row` the size of what follows them.
  BatchIndex(ffi::Span<const int64_t> lead, int64_t row, ffi::Span<const int64_t> out_lead)
      : strides_(out_lead.size(), 0) {
    int64_t stride = row;
    for (int64_t d = static_cast<int64_t>(lead.size()) - 1; d >= 0; --d) {
      if (lead[d] != 1) strides_[d] = stride;
      stride *= lead[d];
    }
  }

  int64_t Offset(int64_t flat, ffi::Span<const int64_t> out_lead) const {
    int64_t offset = 0;
    for (int64_t d = static_cast<int64_t>(out_lead.size()) - 1; d >= 0; --d) {
      offset += (flat % out_lead[d]) * strides_[d];
      flat /= out_lead[d];
    }
    return offset;
  }

 private:
  std::vector<int64_t> strides_;
};

// Calls visit(i) for each i < n with x[i] true, eight entries tested at a time.
template <typename Visit>
inline void ForEachEvent(const bool* x, int64_t n, Visit&& visit) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, x + i, sizeof(word));
    if (word == 0) continue;
    for (int64_t j = i; j < i + 8; ++j)
      if (x[j]) visit(j, true);
  }
  for (; i < n; ++i)
    if (x[i]) visit(i, true);
}

template <typename T, typename Visit>
inline void ForEachEvent(const T* x, int64_t n, Visit&& visit) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] != T(0)) visit(i, x[i]);
}

// One batch entry: y = x @ W over the rows of the active entries of x.
template <typename W, typename X>
void ProductRow(const X* x, int64_t n_pre, const W* w, bool shared, const int32_t* indptr,
                const int32_t* post, const int32_t* syn, W* y, int64_t n_post) {
  std::memset(y, 0, sizeof(W) * n_post);
  constexpr bool kEvents = std::is_same<X, bool>::value;
  if (shared) {
    const W w0 = w[0];
    ForEachEvent(x, n_pre, [&](int64_t i, X xi) {
      const W add = kEvents ? w0 : static_cast<W>(xi) * w0;
      for (int32_t p = indptr[i]; p < indptr[i + 1]; ++p) y[post[p]] += add;
    });
  } else if (syn != nullptr) {
    ForEachEvent(x, n_pre, [&](int64_t i, X xi) {
      for (int32_t p = indptr[i]; p < indptr[i + 1]; ++p)
        y[post[p]] += kEvents ? w[syn[p]] : static_cast<W>(xi) * w[syn[p]];
    });
  } else {
    ForEachEvent(x, n_pre, [&](int64_t i, X xi) {
      for (int32_t p = indptr[i]; p < indptr[i + 1]; ++p)
        y[post[p]] += kEvents ? w[p] : static_cast<W>(xi) * w[p];
    });
  }
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
  for (int64_t b = 0; b < n_batch; ++b) {
    ProductRow<W, X>(xs + xi.Offset(b, out_lead), n_pre, ws + wi.Offset(b, out_lead), shared,
                     ps + pi.Offset(b, out_lead), qs + qi.Offset(b, out_lead),
                     indirect ? ss + si.Offset(b, out_lead) : nullptr, ys + b * n_post, n_post);
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
