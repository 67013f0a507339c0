// env.h — environment switches (CAUSAL_CONV1D_STRICT, CAUSAL_CONV1D_DETERMINISTIC) and counts
// (CAUSAL_CONV1D_GRID_WAVES), read the same way wherever libcc1d reads one.
#pragma once

namespace cc1d {

// Unset, "", 0, false, no, off: false. 1, true, yes, on: true. Anything else: true, with one
// warning per value (a typo must not silently turn a safety switch off). Read on every call.
bool env_flag(const char* name);

// Unset or "": 0. A decimal integer from 0 to `max`: that number. Anything else: 0, with one
// warning per value naming what was expected. Read on every call.
unsigned env_count(const char* name, unsigned max);

}  // namespace cc1d
