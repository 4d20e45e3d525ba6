#!/bin/bash
# Issue 11 on a lent GPU machine: concise text, pictures, prom, JSON of every command, the C API.
set -u
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$B P2PAUDIT_RULES_DIR=$B/../rules
D=/tmp/v11; mkdir -p $D/json
P="$B/p2paudit"
{ date -u; uname -r; nvidia-smi -L; nvidia-smi topo -m; } > $D/machine.txt 2>&1
$P policy > $D/policy.txt 2>&1; echo "rc $?" >> $D/policy.txt
$P --verbose policy > $D/policy-verbose.txt 2>&1
$P > $D/audit.txt 2>&1
$P --format html > $D/machine.html 2>$D/html.stderr; echo "rc $?" >> $D/html.stderr
$P --format dot > $D/machine.dot 2>>$D/html.stderr
$P --format prom > $D/p2paudit.prom 2>>$D/html.stderr
$P --format json > $D/json/audit.json 2>/dev/null
$P --format json topology > $D/json/topology.json 2>/dev/null
$P --format json matrix > $D/json/matrix.json 2>/dev/null
$P --format json policy > $D/json/policy.json 2>/dev/null
$P --format json check gpu0 gpu1 > $D/json/check.json 2>/dev/null
$P --format json explain gpu0 gpu1 > $D/json/explain.json 2>/dev/null
$P --format json probe > $D/json/probe.json 2>/dev/null
$P --format json whitelist > $D/json/whitelist.json 2>/dev/null
$P report -o $D/json/report.json 2>/dev/null
$P snapshot --probe -o $D/snapshot.tar.gz > $D/snapshot.txt 2>&1
$P --format json aggregate $D/json/report.json > $D/json/aggregate.json 2>/dev/null
{ "$B/may_i_peer"; echo "rc $?"; "$B/may_i_peer" / gpu1 gpu0; echo "rc $?"; } > $D/may_i_peer.txt 2>&1
# The installed layout: library and rules found relative to themselves, no env.
mkdir -p /tmp/px/bin /tmp/px/lib /tmp/px/share/p2paudit && cp -r $B/../rules /tmp/px/share/p2paudit/rules
cp $P /tmp/px/bin/; cp $B/lib*.so* /tmp/px/lib/ 2>/dev/null
( unset P2PAUDIT_RULES_DIR; LD_LIBRARY_PATH=/tmp/px/lib /tmp/px/bin/p2paudit policy > $D/installed-policy.txt 2>&1; echo "rc $?" >> $D/installed-policy.txt )
ls -la $D $D/json > $D/listing.txt
tar -czf $OUT/v11.tgz -C $D .
