#!/usr/bin/env bash
# The project's test command (README.md): the whole workspace, including the
# kernel conformance suite, which needs root and fails (never skips) without it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked --release "$@"
