#!/bin/bash
# Validation on a lent 2x H200 machine (see docs/probe.md "Recorded on a real machine").
set -u
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$B P2PAUDIT_RULES_DIR=$B/../rules
D=${OUT:-/tmp/out}
mkdir -p "$D"
date -u > "$D/date.txt"; uname -r >> "$D/date.txt"
nvidia-smi -L > "$D/nvidia-smi-L.txt" 2>&1
{ nvidia-smi topo -m; for x in r w n a p; do echo "== topo -p2p $x"; nvidia-smi topo -p2p $x; done; } > "$D/nvidia-smi-topo.txt" 2>&1
"$B/p2paudit" policy > "$D/policy.txt" 2>&1; echo "rc $?" >> "$D/policy.txt"
"$B/p2paudit" policy --details --format json > "$D/policy.json" 2>"$D/policy.stderr"
"$B/p2paudit" check gpu0 gpu1 > "$D/check.txt" 2>&1; echo "rc $?" >> "$D/check.txt"
"$B/p2paudit" probe --copy --format json > "$D/probe-copy.json" 2>"$D/probe-copy.stderr"; echo "rc $?" >> "$D/probe-copy.stderr"
"$B/cuda-peer-copy" > "$D/cuda-peer-copy.txt" 2>&1; echo "rc $?" >> "$D/cuda-peer-copy.txt"
"$B/p2paudit" probe --copy > "$D/probe-copy.txt" 2>&1; echo "rc $?" >> "$D/probe-copy.txt"
"$B/cuda-peer-copy" >> "$D/cuda-peer-copy.txt" 2>&1; echo "rc $?" >> "$D/cuda-peer-copy.txt"
"$B/p2paudit" snapshot --probe --copy -o "$D/snapshot-probe.tar.gz" > "$D/snapshot.txt" 2>&1; echo "rc $?" >> "$D/snapshot.txt"
"$B/p2paudit" --sysroot "$D/snapshot-probe.tar.gz" policy > "$D/policy-from-snapshot.txt" 2>&1; echo "rc $?" >> "$D/policy-from-snapshot.txt"
ls -la "$D"
tar -czf /tmp/all.tgz -C "$D" . && rm -rf "$D"/* && mv /tmp/all.tgz "$D/all.tgz"
