// bench_tensor.h — a contiguous tensor for the C++ benchmarks: owned host memory (which the fake
// driver also treats as device memory, filled with a non-zero pattern) and its cc1d_tensor
// descriptor.
#pragma once
#include <cstdint>
#include <vector>

#include "cc1d/cc1d.h"

struct BenchTensor {
  std::vector<float> data;
  cc1d_tensor t{};
  BenchTensor(int device, std::vector<int64_t> shape, cc1d_dtype dtype = CC1D_FLOAT32) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    data.assign((size_t)n, 0.5f);  // 16-bit types read pairs of 0.0 and 0.5: fine for timing
    t.data = data.data();
    t.dtype = dtype;
    t.device_type = device;
    t.ndim = (int32_t)shape.size();
    int64_t stride = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      t.shape[i] = shape[i];
      t.strides[i] = stride;
      stride *= shape[i];
    }
  }
};
