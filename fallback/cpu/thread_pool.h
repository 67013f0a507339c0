// thread_pool.h — a small persistent pool for the CPU backends (and the emulator's blocks).
// Size: CAUSAL_CONV1D_NUM_THREADS, else std::thread::hardware_concurrency(). Calls from several
// threads run at the same time (sharing the workers); a process forked while a call runs gets a
// fresh pool in the child.
#pragma once
#include <cstdint>
#include <functional>

namespace cc1d {

// Calls fn(begin, end) over disjoint ranges covering [0, n), on the pool and the calling
// thread, and returns when all are done. Exceptions from fn are rethrown (the first one).
// Nested calls from inside fn run serially on the calling thread.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

int num_threads();

}  // namespace cc1d
