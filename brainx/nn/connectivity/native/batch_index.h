// Batch axes of the native kernels: where each operand's batch entry starts.
//
// The kernels take operands with leading (batch) axes that are either the output's or 1 (an
// operand shared by every batch entry, as vmap's expand_dims leaves it). BatchIndex turns the
// flat index of an output batch entry into the offset of the operand's entry. Included by
// event_kernels.cc and delayed_kernels.cc (one library; build.py hashes this header too).

#ifndef BRAINX_NATIVE_BATCH_INDEX_H_
#define BRAINX_NATIVE_BATCH_INDEX_H_

#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace brainx_native {

// Where one operand's batch entry starts, for each batch entry of the output.
class BatchIndex {
 public:
  // `lead` is the operand's leading axes, `row` the size of what follows them.
  BatchIndex(xla::ffi::Span<const int64_t> lead, int64_t row,
             xla::ffi::Span<const int64_t> out_lead)
      : strides_(out_lead.size(), 0) {
    int64_t stride = row;
    for (int64_t d = static_cast<int64_t>(lead.size()) - 1; d >= 0; --d) {
      if (lead[d] != 1) strides_[d] = stride;
      stride *= lead[d];
    }
  }

  int64_t Offset(int64_t flat, xla::ffi::Span<const int64_t> out_lead) const {
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

}  // namespace brainx_native

#endif  // BRAINX_NATIVE_BATCH_INDEX_H_
