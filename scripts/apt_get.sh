# apt_get.sh — apt_get ARGS...: `$SUDO apt-get ARGS...` that waits for the Debian package lock
# instead of failing at once, as on a fresh cloud VM where unattended upgrades hold it for
# minutes. Each try waits up to a minute in apt itself (DPkg::Lock::Timeout), then it retries
# every CC1D_APT_RETRY_SECONDS (10) until CC1D_APT_WAIT_SECONDS (900) have passed, saying who
# holds the lock. Any other failure is printed and returned at once. Sourced by setup.sh.
apt_get() {
  local out start=$SECONDS
  while ! out=$(${SUDO:-} env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=60 "$@" 2>&1); do
    if ! grep -qiE "could not get lock|unable to (acquire|lock)|is another process using it" <<<"$out"; then
      echo "$out" >&2
      return 1
    fi
    if [ $((SECONDS - start)) -ge "${CC1D_APT_WAIT_SECONDS:-900}" ]; then
      echo "setup: gave up after $((SECONDS - start)) s waiting for the Debian package lock: $(grep -iE 'lock' <<<"$out" | head -1)" >&2
      return 1
    fi
    echo "setup: waiting for the Debian package lock ($(grep -ioE 'held by process [0-9]+( \([^)]*\))?' <<<"$out" | head -1 || echo 'held by another process'))"
    sleep "${CC1D_APT_RETRY_SECONDS:-10}"
  done
  [ -z "$out" ] || echo "$out"
}
