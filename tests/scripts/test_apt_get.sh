#!/usr/bin/env bash
# test_apt_get.sh — scripts/apt_get.sh against a stand-in apt-get: it waits while the lock is
# held (and says by whom), then succeeds; any other failure returns at once; it gives up in time.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/apt-get" <<'FAKE'
#!/usr/bin/env bash
n=$(cat "$STATE" 2>/dev/null || echo 0); echo $((n + 1)) >"$STATE"
case "$MODE" in
  lock) if [ "$n" -lt 2 ]; then
          echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (unattended-upgr)" >&2; exit 100
        fi; echo "installed $*" ;;
  other) echo "E: Unable to locate package nosuchpackage" >&2; exit 100 ;;
esac
FAKE
chmod +x "$tmp/apt-get"
export PATH="$tmp:$PATH" CC1D_APT_RETRY_SECONDS=0 SUDO=""
source "$here/scripts/apt_get.sh"
fail() { echo "FAILED: $*"; exit 1; }

out=$(STATE=$tmp/n1 MODE=lock apt_get install -y foo 2>&1) || fail "lock held twice, then free: $out"
[ "$(cat "$tmp/n1")" = 3 ] || fail "expected 3 tries, got $(cat "$tmp/n1")"
[ "$(grep -c 'waiting for the Debian package lock (held by process 4242 (unattended-upgr))' <<<"$out")" = 2 ] || fail "$out"
grep -q "installed -o DPkg::Lock::Timeout=60 install -y foo" <<<"$out" || fail "apt's output: $out"

out=$(STATE=$tmp/n2 MODE=other apt_get install nosuchpackage 2>&1) && fail "another error must fail"
[ "$(cat "$tmp/n2")" = 1 ] || fail "another error is not retried"
grep -q "Unable to locate package" <<<"$out" || fail "the error is shown: $out"

out=$(STATE=$tmp/n3 MODE=lock CC1D_APT_WAIT_SECONDS=0 apt_get install foo 2>&1) && fail "must give up"
grep -q "gave up after" <<<"$out" || fail "$out"

# apt_install_missing: only the packages dpkg does not know are installed, after one update.
cat >"$tmp/dpkg" <<'FAKE'
#!/usr/bin/env bash
[ "$2" = present ]
FAKE
chmod +x "$tmp/dpkg"
cat >"$tmp/apt-log" <<'FAKE'
#!/usr/bin/env bash
echo "$*" >>"$LOG"
FAKE
chmod +x "$tmp/apt-log"
cp "$tmp/apt-log" "$tmp/apt-get"
out=$(LOG=$tmp/log1 apt_install_missing who present absent1 absent2 2>&1) || fail "install: $out"
[ "$out" = "who: installing Debian packages: absent1 absent2" ] || fail "message: $out"
grep -q "update -qq" "$tmp/log1" || fail "no update: $(cat "$tmp/log1")"
grep -q "install -y -qq absent1 absent2$" "$tmp/log1" || fail "install line: $(cat "$tmp/log1")"
out=$(LOG=$tmp/log2 apt_install_missing who present 2>&1) || fail "nothing missing: $out"
[ -z "$out" ] && [ ! -e "$tmp/log2" ] || fail "nothing missing must not call apt-get: $out"
echo "1 passed, 0 failed"
