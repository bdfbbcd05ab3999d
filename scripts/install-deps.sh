#!/usr/bin/env bash
# Installs the Debian 12 packages Tessera needs to build, test and benchmark.
# Idempotent: only packages that are missing are installed; a second run does nothing.
# Runs apt-get as root (directly, or through sudo when available).
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build ccache pkg-config clang-format
  # runtime libraries
  libopenblas-dev libsleef-dev
  # distributed: Gloo (TCP backend across hosts)
  libgloo-dev
  # CLI, formatting, JSON
  libcli11-dev libfmt-dev nlohmann-json3-dev
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # outside oracles and benchmark anchors (test/bench time only, never in the library)
  python3 python3-numpy python3-torch libblis-dev libdnnl-dev openmpi-bin libopenmpi-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
