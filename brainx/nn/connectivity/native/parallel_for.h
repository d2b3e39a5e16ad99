// ParallelFor: a few tasks shared between the calling thread and XLA's intra-op thread pool.
//
// The caller and the helpers it schedules take task indices from one atomic counter, so the
// caller never waits for a helper that has not started: a helper that starts late (or never:
// a busy pool) finds every task taken and leaves, and the caller does them all. The caller
// waits, asleep, only for tasks a helper has taken. The state they share lives on the heap, owned by
// every task that may still touch it, so a helper starting after the call returned is safe.

#ifndef BRAINX_NATIVE_PARALLEL_FOR_H_
#define BRAINX_NATIVE_PARALLEL_FOR_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>

#include "xla/ffi/api/ffi.h"

namespace brainx_native {

struct ParallelState {
  std::atomic<int64_t> next{0};
  int64_t busy = 0;  // helpers inside Work, under `lock`
  int64_t tasks = 0;
  std::function<void(int64_t)> body;
  std::mutex lock;
  std::condition_variable idle;

  void Work(bool helper) {
    if (helper) {
      std::lock_guard<std::mutex> hold(lock);
      ++busy;
    }
    for (int64_t t = next.fetch_add(1); t < tasks; t = next.fetch_add(1)) body(t);
    if (helper) {
      std::lock_guard<std::mutex> hold(lock);
      if (--busy == 0) idle.notify_all();
    }
  }
};

// Runs body(0) ... body(tasks - 1), each once, on up to `workers` threads (the caller's
// included), and returns when all are done.
inline void ParallelFor(xla::ffi::ThreadPool& pool, int64_t tasks, int64_t workers,
                        std::function<void(int64_t)> body) {
  if (tasks <= 1 || workers <= 1) {
    for (int64_t t = 0; t < tasks; ++t) body(t);
    return;
  }
  auto state = std::make_shared<ParallelState>();
  state->tasks = tasks;
  state->body = std::move(body);
  const int64_t helpers = std::min<int64_t>(workers, tasks) - 1;
  for (int64_t h = 0; h < helpers; ++h) pool.Schedule([state] { state->Work(true); });
  state->Work(false);
  // every task is taken; wait (asleep, not spinning: on a busy machine, or with many devices
  // of one process calling at once, a spinning caller takes the core its helper needs) for
  // the helpers still working on theirs
  std::unique_lock<std::mutex> hold(state->lock);
  state->idle.wait(hold, [&] { return state->busy == 0; });
}

// The threads a kernel may use: XLA's pool (its size), at most BRAINX_NATIVE_THREADS when
// that is set (read once), at least 1.
inline int64_t Workers(xla::ffi::ThreadPool& pool) {
  static const int64_t cap = [] {
    const char* v = std::getenv("BRAINX_NATIVE_THREADS");
    const long n = v ? std::strtol(v, nullptr, 10) : 0;
    return n > 0 ? static_cast<int64_t>(n) : int64_t{1} << 30;
  }();
  const int64_t n = std::min(pool.num_threads(), cap);
  return n < 1 ? 1 : n;
}

}  // namespace brainx_native

#endif  // BRAINX_NATIVE_PARALLEL_FOR_H_
