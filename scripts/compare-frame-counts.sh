#!/usr/bin/env bash
# Frame counts of `offload analyze` against Wireshark's reader (capinfos -c)
# over a directory of public captures, e.g. tcpdump's tests/:
#   scripts/compare-frame-counts.sh /path/to/tcpdump/tests
# Prints "capinfos offload file" per capture (X: capinfos cannot read it) and
# a summary line. Needs capinfos (wireshark-common), python3 and a release build.
set -euo pipefail
DIR=${1:?usage: compare-frame-counts.sh DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OFFLOAD=${OFFLOAD:-$ROOT/target/release/offload}
same=0 differ=0 unreadable=0
for f in "$DIR"/*.pcap "$DIR"/*.pcapng; do
    [ -e "$f" ] || continue
    t=$(timeout 20 capinfos -c -M -T -r "$f" 2>/dev/null | cut -f2 || true)
    o=$(timeout 20 "$OFFLOAD" analyze --threads 1 --json "$f" 2>/dev/null | python3 -c "import json,sys
try:
    print(sum(i['frames'] for i in json.load(sys.stdin)['inputs']))
except Exception:
    print('ERR')" || true)
    echo "${t:-X} $o $f"
    if [ -z "$t" ]; then unreadable=$((unreadable + 1))
    elif [ "$t" = "$o" ]; then same=$((same + 1))
    else differ=$((differ + 1)); fi
done
echo "same $same  differ $differ  capinfos-unreadable $unreadable"
