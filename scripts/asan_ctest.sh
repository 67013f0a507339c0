#!/usr/bin/env bash
# scripts/asan_ctest.sh BUILD_DIR [ctest args...] — the sanitizer job's ctest (make asan-test).
#
# One exception to "a failure fails": LeakSanitizer's own stop-the-world tracer sometimes crashes
# at process exit ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal error"),
# after the test has passed and before any leak is looked for: an intermittent fault of the
# sanitizer runtime (google/sanitizers#1353), seen here once in about 40 runs of a test that
# loads NVRTC. When every failed test failed only that way, those tests run once more and their
# second run decides. A leak report, an ASan or UBSan error, or a failed check fails at once.
set -u
build=$1
shift
ctest --test-dir "$build" "$@" && exit 0
log="$build/Testing/Temporary/LastTest.log"
# Each failed test's output, classified: "tracer" when it holds the tracer's crash and nothing
# else a sanitizer or a test reports, "real" otherwise.
verdicts=$(awk '
  / Testing: / { name = $3; out = "" }
  { out = out "\n" $0 }
  /^Test Failed\./ {
    tracer = out ~ /LeakSanitizer has encountered a fatal error/
    other = out ~ /detected memory leaks|ERROR: AddressSanitizer|runtime error:|ERROR: [A-Za-z]+Sanitizer|test cases:.*[1-9][0-9]* failed|Status: FAILURE/
    print name, (tracer && !other) ? "tracer" : "real"
  }' "$log")
echo "$verdicts" | sed 's/^/[asan_ctest] failed: /'
if [ -z "$verdicts" ] || echo "$verdicts" | grep -qv ' tracer$'; then
  exit 1
fi
echo "[asan_ctest] only LeakSanitizer's tracer crashed (google/sanitizers#1353): running those tests once more"
ctest --test-dir "$build" --rerun-failed --output-on-failure
