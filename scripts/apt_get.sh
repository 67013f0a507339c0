# apt_get.sh — apt_get ARGS...: `$SUDO apt-get ARGS...` that waits for the Debian package lock
# instead of failing at once, as on a fresh cloud VM where unattended upgrades hold it for
# minutes. Each try waits up to a minute in apt itself (DPkg::Lock::Timeout), then it retries
# every CC1D_APT_RETRY_SECONDS (10) until CC1D_APT_WAIT_SECONDS (900) have passed, saying who
# holds the lock. Any other failure is printed and returned at once. Sourced by setup.sh and the
# test scripts that install packages of their own.
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

# apt_install_missing WHO PKG...: installs those of the Debian packages PKG... that are missing
# (through apt_get, with sudo when not root), saying so as WHO. Sourced by setup.sh and the
# aarch64 and compilers test scripts.
apt_install_missing() {
  local who=$1 p missing=()
  shift
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "$who: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  apt_get update -qq
  apt_get install -y -qq "${missing[@]}" >/dev/null
}
