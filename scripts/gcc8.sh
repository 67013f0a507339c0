#!/usr/bin/env bash
# gcc8.sh DIR: GCC 8.4 (Ubuntu 20.04's g++-8, the major version of RHEL 8's default compiler, the
# oldest that builds libcc1d) unpacked into DIR without installing anything: the seven packages
# from Ubuntu's archive, each checked against its SHA-256, then `dpkg -x`. Prints the directory
# of g++-8 and the one of the libisl.so.22 its cc1plus loads (LD_LIBRARY_PATH while it compiles).
# Later runs find DIR complete and download nothing. Used by compilers_test.sh.
set -euo pipefail
DIR="${1:?usage: scripts/gcc8.sh DIR}"
POOL=http://archive.ubuntu.com/ubuntu/pool
# name, pool path, SHA-256 (Ubuntu focal's release pocket, frozen since 2020)
PACKAGES=(
  "cpp-8 universe/g/gcc-8/cpp-8_8.4.0-3ubuntu2_amd64.deb 133fb9dcba0e1ba4bd06deb458b746d6b370791699154d5aa4989db412ad2fec"
  "gcc-8 universe/g/gcc-8/gcc-8_8.4.0-3ubuntu2_amd64.deb dde03b929f05f6e8318387bf5818877b1d972de7a697a000fa4c516af5e68d7f"
  "g++-8 universe/g/gcc-8/g++-8_8.4.0-3ubuntu2_amd64.deb 0ce2c4174400cbd32a3e7cec830331dab1338f1e82d35fc8f963fc20a7d77270"
  "gcc-8-base universe/g/gcc-8/gcc-8-base_8.4.0-3ubuntu2_amd64.deb db96f03b486f76e2a49ed6c59365d1673b73c42bf172aaa29715478687d2ae6d"
  "libgcc-8-dev universe/g/gcc-8/libgcc-8-dev_8.4.0-3ubuntu2_amd64.deb 8733725ae1d9d320f83253111eb116789dde67f83384fde7940287c3c147de6b"
  "libstdc++-8-dev universe/g/gcc-8/libstdc++-8-dev_8.4.0-3ubuntu2_amd64.deb 5c23053a1c1332b48c44984bb28d38cf487f83cfb08e938918e5854d750a9f0d"
  "libisl22 main/i/isl/libisl22_0.22.1-1_amd64.deb 67cadab06a50a29cde11c1c1d02847afbae6f0465686481c9106577777b88a44"
)
if [ "$(uname -m)" != x86_64 ]; then
  echo "gcc8.sh: these packages are for x86_64; this machine is $(uname -m)" >&2
  exit 1
fi
if [ ! -e "$DIR/.complete" ]; then
  rm -rf "$DIR"
  mkdir -p "$DIR/debs"
  for entry in "${PACKAGES[@]}"; do
    read -r name path sum <<<"$entry"
    deb="$DIR/debs/$(basename "$path")"
    if ! curl -fsSL --retry 3 -o "$deb" "$POOL/$path"; then
      echo "gcc8.sh: could not download $name from $POOL/$path; check the network or the proxy" >&2
      exit 1
    fi
    if ! echo "$sum  $deb" | sha256sum -c --quiet - >&2; then
      echo "gcc8.sh: $name does not match its SHA-256; not using it" >&2
      exit 1
    fi
    dpkg -x "$deb" "$DIR/root"
  done
  rm -rf "$DIR/debs"
  touch "$DIR/.complete"
fi
echo "$DIR/root/usr/bin $DIR/root/usr/lib/x86_64-linux-gnu"
