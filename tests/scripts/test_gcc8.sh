#!/usr/bin/env bash
# test_gcc8.sh — scripts/gcc8.sh against a stand-in curl: a package whose bytes do not match its
# SHA-256 is refused and nothing is marked complete; a failed download names the package; a
# complete directory is used without downloading.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/curl" <<'FAKE'
#!/usr/bin/env bash
echo called >>"$CALLS"
[ "$MODE" = down ] && exit 22
while [ $# -gt 1 ]; do [ "$1" = -o ] && echo "not the package" >"$2"; shift; done
FAKE
chmod +x "$tmp/curl"
export PATH="$tmp:$PATH"
fail() { echo "FAILED: $*"; exit 1; }
[ "$(uname -m)" = x86_64 ] || { echo "test_gcc8: gcc8.sh serves x86_64 only; this is $(uname -m)"; exit 0; }

out=$(CALLS=$tmp/c1 MODE=bad "$here/scripts/gcc8.sh" "$tmp/g" 2>&1) && fail "wrong bytes must fail: $out"
grep -q "cpp-8 does not match its SHA-256" <<<"$out" || fail "the refusal names the package: $out"
[ ! -e "$tmp/g/.complete" ] || fail "a refused download left the directory marked complete"
[ ! -e "$tmp/g/root" ] || fail "a refused package was unpacked"

out=$(CALLS=$tmp/c2 MODE=down "$here/scripts/gcc8.sh" "$tmp/g" 2>&1) && fail "a failed download must fail: $out"
grep -q "could not download cpp-8 from http://archive.ubuntu.com/ubuntu/pool/" <<<"$out" || fail "$out"

mkdir -p "$tmp/done" && touch "$tmp/done/.complete"
out=$(CALLS=$tmp/c3 MODE=bad "$here/scripts/gcc8.sh" "$tmp/done") || fail "a complete directory: $out"
[ "$out" = "$tmp/done/root/usr/bin $tmp/done/root/usr/lib/x86_64-linux-gnu" ] || fail "printed: $out"
[ ! -e "$tmp/c3" ] || fail "a complete directory was downloaded again"
echo "test_gcc8: all passed"
