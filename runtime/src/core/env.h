// env.h — boolean environment switches (CAUSAL_CONV1D_STRICT, CAUSAL_CONV1D_DETERMINISTIC), read
// the same way wherever libcc1d reads one.
#pragma once

namespace cc1d {

// Unset, "", 0, false, no, off: false. 1, true, yes, on: true. Anything else: true, with one
// warning per value (a typo must not silently turn a safety switch off). Read on every call.
bool env_flag(const char* name);

}  // namespace cc1d
