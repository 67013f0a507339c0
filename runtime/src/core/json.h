// json.h — the little JSON the runtime writes (cc1d_report): string literals.
#pragma once
#include <string>

namespace cc1d {

// A JSON string literal for s, quotes included. Bytes that are not valid UTF-8 (a torch version
// string from a broken build, a path in a legacy encoding) become U+FFFD, so strict parsers
// accept every report.
std::string json_quote(const std::string& s);

}  // namespace cc1d
