#!/bin/bash
# Issue 17 on a lent H100 VM: the NVIDIA third-party gate read from the live driver (GPU <-> NIC).
set -u
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$B P2PAUDIT_RULES_DIR=$(cd $B/../rules && pwd)
D=/tmp/v17; mkdir -p $D
P="$B/p2paudit"
{ date -u; uname -r; nvidia-smi -L; nvidia-smi topo -m; grep -E 'GrdmaPciTopoCheckOverride' /proc/driver/nvidia/params; grep -E '^(nvidia|mlx5|ib_)' /proc/modules | cut -d' ' -f1; } > $D/machine.txt 2>&1
$P > $D/audit.txt 2>&1; echo "rc $?" >> $D/audit.txt
$P topology > $D/topology.txt 2>&1
$P policy > $D/policy.txt 2>&1; echo "rc $?" >> $D/policy.txt
$P --verbose policy > $D/policy-verbose.txt 2>&1
$P --format json policy > $D/policy.json 2>/dev/null
$P --format env policy > $D/env.txt 2>&1
$P check gpu0 nic0 > $D/check-gpu0-nic0.txt 2>&1; echo "rc $?" >> $D/check-gpu0-nic0.txt
$P --format json check gpu0 nic0 > $D/check-gpu0-nic0.json 2>/dev/null
$P snapshot -o $D/snapshot.tar.gz > $D/snapshot.txt 2>&1
$P --sysroot $D/snapshot.tar.gz policy > $D/policy-from-snapshot.txt 2>&1; echo "rc $?" >> $D/policy-from-snapshot.txt
tar -czf $OUT/v17.tgz -C $D .
