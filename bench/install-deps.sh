#!/usr/bin/env bash
# System packages the benchmark's load generators need: the NATS C client (libnats-dev, JetStream included)
# and gcc to build the small C programs in bench/c/. Installed only when missing; never fatal for the tests
# that do not need them (the benchmark smoke test then reports what is missing).
set -u
need=()
dpkg -s libnats-dev >/dev/null 2>&1 || need+=(libnats-dev)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "bench: missing ${need[*]} and no apt-get: install the NATS C client (libnats), gcc and pkg-config" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "bench: missing ${need[*]} and not root: install them to run the benchmark" >&2; exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null 2>&1 || true
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
  || echo "bench: could not install ${need[*]}" >&2
exit 0
