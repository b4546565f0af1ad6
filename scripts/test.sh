#!/usr/bin/env bash
# The project's test command (README.md): every suite of the workspace, as
# root, including the ones `cargo test` alone skips for a contributor
# without root (`#[ignore = "needs root: scripts/test.sh runs it"]`: private
# network namespaces, TAP devices, the live-kernel and QEMU conformance
# suites). First it runs the idempotent .ci/install, which installs what a
# fresh clone lacks (tshark, QEMU, ...) and fetches the VM kernels once into
# target/kernels/; a second run installs nothing. Every suite runs even
# when one fails (--no-fail-fast); the exit status is non-zero if any did.
# Extra arguments go to cargo (e.g. `-p offload-lab`).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh runs every suite, and most need root (namespaces, /dev/net/tun, QEMU)." >&2
  echo "Run:  sudo bash scripts/test.sh" >&2
  echo "(without root, \`cargo test --workspace\` runs the suites that need none)" >&2
  exit 2
fi

bash .ci/install
# A machine whose rustup was installed by .ci/install has cargo here.
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi

# Python packages .ci/install put in the project (Debian's python3 takes no
# system-wide pip install).
export PYTHONPATH="$PWD/target/python-deps${PYTHONPATH:+:$PYTHONPATH}"

# `--workspace` would override a `-p`/`--package` given here (cargo tests
# every member when both are present), so it is passed only without one.
scope=(--workspace)
for arg in "$@"; do
  case "$arg" in
    -p | -p* | --package | --package=*) scope=() ;;
  esac
done
exec cargo test "${scope[@]}" --locked --release --no-fail-fast "$@" -- --include-ignored
