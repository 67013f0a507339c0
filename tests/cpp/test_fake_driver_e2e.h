// test_fake_driver_e2e.h — the child side of test_fake_driver_e2e.cpp (scenarios run in a fresh
// process against the fake libcuda through libcc1d's C ABI; results printed as "KEY value" lines).
#pragma once

// Runs one scenario ("report", "one", "graph", "capture", "fwd", "fwd-small") and returns the process exit code.
int e2e_child_main(const char* scenario);

// Number of forward cases the "fwd" scenario runs.
constexpr int kE2eCases = 34;
// ... and the "fwd-small" scenario.
constexpr int kE2eSmallCases = 4;

// NVRTC's lowered name of cc1d::causal_conv1d_fwd_kernel<float, float, 4, 6> (time_vec_silu), the
// variant the "graph" scenario launches.
constexpr const char* kGraphLowered = "_ZN4cc1d24causal_conv1d_fwd_kernelIffLi4ELi6EEEvNS_9FwdParamsE";
