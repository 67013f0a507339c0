// causal_conv1d.cu — the translation unit NVRTC compiles (and the emulator builds for the
// host). Each kernel family lives in its own header; variants are instantiated by the
// runtime through name expressions, so only what a program uses is compiled.
#include "bwd.cuh"
#include "fwd.cuh"
#include "update.cuh"
#include "varlen.cuh"
