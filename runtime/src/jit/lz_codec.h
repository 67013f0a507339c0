// lz_codec.h — a small LZ77 byte codec of our own, used to embed compressed PTX in libcc1d.
//
// Stream format (LZ4-like, tuned on our PTX): a sequence of tokens, each
//   a token byte: literal count in the top 3 bits, match length minus 4 in the low 5 bits; a field at its
//     maximum (7, 31) continues in extension bytes that add to it, the run ending at the first byte < 255
//     (the literal count's right after the token, the match length's after the offset code);
//   the literals;
//   an offset code, 7 bits a byte, low bits first, the top bit set on all but the last of at most 3 bytes:
//     0 reuses the last offset, 1 the one before it (the two swap), c >= 2 is offset c - 1 (window 2 MiB),
//     which becomes the last (the last the one before); a repeat code before any offset is an error.
//     PTX repeats a line's shape with other registers, so the same offsets recur across literal gaps.
// The last token has literals only (match field 0) and ends the stream. A match may overlap its output
// (offset < length) and then repeats the last `offset` bytes. The raw size is not in the stream: the caller
// keeps it, and the decoder checks the output is exactly that long.
#pragma once
#include <cstddef>
#include <string>

namespace cc1d {

// Compresses `in` (under 4 GiB); deterministic (same input, same output). Used at build time and by tests.
std::string lz_compress(const std::string& in);

// Decompresses into exactly `raw_size` bytes. Returns false (never crashes, never reads or writes out of
// bounds) on any malformed, truncated or oversized input, or when the output would not be exactly
// raw_size bytes; `*out` is then empty.
bool lz_decompress(const char* data, size_t size, size_t raw_size, std::string* out);

}  // namespace cc1d
