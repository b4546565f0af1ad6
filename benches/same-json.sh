#!/usr/bin/env bash
# Checks that a speed change left `offload analyze --json` byte-identical:
# runs an older and a newer binary on every bundled sample (samples/*)
# and every public capture the tests use
# (crates/offload-analyze/tests/data/public/, link/ included), whole and
# cut to header-only copies (`editcap -s 96` and `-s 200`, as
# `tcpdump -s N` would take them), and on any further captures given, each
# with several option sets (the default sizes, three sizes in another order,
# one size, every kernel line, two threads), and compares the outputs with
# cmp. Prints one line per difference and exits 1 if there is any.
#
# Usage: benches/same-json.sh OLD_OFFLOAD NEW_OFFLOAD [CAPTURE...]
# (editcap from tshark's package, apt-get install tshark). A large capture
# (benches/real-capture.sh) is run with the default options only.
set -euo pipefail

OLD=${1:?usage: same-json.sh OLD_OFFLOAD NEW_OFFLOAD [CAPTURE...]}
NEW=${2:?usage: same-json.sh OLD_OFFLOAD NEW_OFFLOAD [CAPTURE...]}
shift 2
command -v editcap >/dev/null || { echo "same-json: editcap not found (apt-get install tshark)" >&2; exit 1; }
T=$(mktemp -d /tmp/ofl-same-json.XXXXXX)
trap 'rm -rf "$T"' EXIT
ROOT=$(dirname "$0")/..

SMALL=()
PUBLIC=$ROOT/crates/offload-analyze/tests/data/public
for f in "$ROOT"/samples/* "$PUBLIC"/*.pcap* "$PUBLIC"/link/*.pcap*; do
    [ -f "$f" ] || continue
    # Cut copies keep the directory in their name (two dirs can hold the
    # same file name).
    b=$(echo "${f#"$ROOT"/}" | tr / _)
    SMALL+=("$f")
    for s in 96 200; do
        editcap -s "$s" "$f" "$T/$s-$b" >/dev/null
        SMALL+=("$T/$s-$b")
    done
done
OPTSETS=(
    ""
    "--gro-max-size 185000,65536,131072"
    "--gro-max-size 65536"
    "--kernel 6.1"
    "--kernel 6.12"
    "--kernel 7.x"
    "--threads 2"
    "--threads 1 --truncated-frames unmerged"
)
diffs=0
runs=0
check() {
    local f=$1 o=$2
    # shellcheck disable=SC2086
    "$OLD" analyze "$f" --json $o >"$T/old.json" 2>"$T/old.err" || true
    # shellcheck disable=SC2086
    "$NEW" analyze "$f" --json $o >"$T/new.json" 2>"$T/new.err" || true
    runs=$((runs + 1))
    if ! cmp -s "$T/old.json" "$T/new.json" || ! cmp -s "$T/old.err" "$T/new.err"; then
        echo "DIFFERENT: $f $o"
        diffs=$((diffs + 1))
    fi
}
for f in "${SMALL[@]}"; do
    for o in "${OPTSETS[@]}"; do check "$f" "$o"; done
done
for f in "$@"; do
    check "$f" "--threads 1"
    check "$f" ""
done
echo "same-json: $runs runs, $diffs different"
[ "$diffs" = 0 ]
