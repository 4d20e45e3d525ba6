#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Opens the audit's page (p2paudit --format html, docs/pictures.md) of each SYSROOT in headless
# Chromium. Fails on any console message or script error; when the DOM after the scripts ran lacks
# an SVG node for a function or host bridge, or marks other ports than those whose ACS redirects;
# when #pair=0,1 does not open that pair's explanation; or when the screenshot (with that pair
# open) is not a 1400x1000 PNG showing the tree's colours.
# Usage: html_chromium_test.sh P2PAUDIT SYSROOT...; P2PAUDIT_SCREENSHOT_DIR=DIR keeps the screenshots.
# Without Chromium it is skipped (exit 77), except in CI (CI=true), where that is a failure.
set -euo pipefail
tool=$1
shift
chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium ]]; then
  if [[ ${CI:-} == true ]]; then
    echo "FAIL: chromium is not installed (scripts/install-deps --test installs it)" >&2
    exit 1
  fi
  echo "SKIP: chromium is not installed (scripts/install-deps --test installs it)"
  exit 77
fi
work=$(mktemp -d /tmp/p2paudit-chromium-XXXXXX)
trap 'rm -rf "$work"' EXIT

browse() {  # browse URL ARGS...: headless Chromium with its own profile, console messages on stderr
  local url=$1
  shift
  HOME=$work timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$work/profile" --enable-logging=stderr --v=0 "$@" "$url"
}

status=0
for sysroot in "$@"; do
  name=$(basename "$(dirname "$sysroot")")
  page=$work/$name.html
  "$tool" --sysroot "$sysroot" --format html >"$page"
  "$tool" --sysroot "$sysroot" topology --format json >"$work/$name.json"
  browse "file://$page" --dump-dom >"$work/$name.dom" 2>"$work/$name.log"
  browse "file://$page#pair=0,1" --dump-dom >"$work/$name.pair.dom" 2>>"$work/$name.log"
  browse "file://$page#pair=0,1" --screenshot="$work/$name.png" --window-size=1400,1000 >/dev/null 2>>"$work/$name.log"
  if ! python3 - "$work/$name" <<'EOF'; then
import json, re, struct, sys, zlib

base = sys.argv[1]
topo = json.load(open(base + ".json"))
dom = open(base + ".dom", encoding="utf-8", errors="replace").read()
pair_dom = open(base + ".pair.dom", encoding="utf-8", errors="replace").read()
log = open(base + ".log", encoding="utf-8", errors="replace").read()
failures = []

# Any console message is a failure: the page logs nothing when it works.
console = [line for line in log.splitlines() if ":CONSOLE" in line]
failures += ["console: " + line for line in console]
for d in (dom, pair_dom):
    error = re.search(r'<html[^>]*\bdata-script-error="([^"]*)"', d)
    if error:
        failures.append("script error: " + error.group(1))

# The scripts ran and drew every function and host bridge as an SVG node.
nodes = len(re.findall(r'<g class="node ', dom))
expected = len(topo["functions"]) + len(topo["host_bridges"])
if nodes != expected:
    failures.append(f"{nodes} SVG nodes in the tree, expected {expected}")
if f'data-drawn="{expected}"' not in dom:
    failures.append("the page did not finish drawing (data-drawn)")
redirecting = [f for f in topo["functions"] if f["acs"] == "present" and f["acs_ctrl"] & 0x2C]
marked = len(re.findall(r'<g class="node [^"]*\bredirect\b', dom))
if marked != len(redirecting):
    failures.append(f"{marked} ports marked ACS redirect, expected {len(redirecting)}")

# #pair=0,1 opened the first pair's explanation: the kernel's and the policy's reasons.
panel = pair_dom[pair_dom.find('id="panel"'):]
if "Kernel (pci_p2pdma_distance)" not in panel or "Policy: " not in panel or "\u2192" not in panel:
    failures.append("#pair=0,1 did not show the pair's explanation")

# The screenshot: a PNG of the window's size, not blank, with the tree's colours in it.
png = open(base + ".png", "rb").read()
if png[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(print("FAIL: the screenshot is not a PNG") or 1)
width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
if (width, height) != (1400, 1000) or depth != 8 or colour not in (2, 6):
    failures.append(f"screenshot {width}x{height}, depth {depth}, colour type {colour}: expected 1400x1000 RGB(A)")
else:
    at, idat = 8, b""
    while at < len(png):
        size, kind = struct.unpack(">I4s", png[at:at + 8])
        if kind == b"IDAT":
            idat += png[at + 8:at + 8 + size]
        at += 12 + size
    raw, bpp = zlib.decompress(idat), 3 if colour == 2 else 4
    stride, rows, prev = width * bpp, [], bytearray(width * bpp)
    for y in range(height):  # PNG filters: None, Sub, Up, Average, Paeth
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    counts = {}
    for line in rows:
        for i in range(0, stride, bpp):
            rgb = bytes(line[i:i + 3])
            counts[rgb] = counts.get(rgb, 0) + 1
    def near(hex_colour):
        want = bytes.fromhex(hex_colour)
        return sum(n for rgb, n in counts.items() if all(abs(rgb[k] - want[k]) <= 4 for k in range(3)))
    background = near("fafafa") + near("ffffff")
    if background > 0.97 * width * height:
        failures.append("the screenshot is blank")
    if near("ffcc80") < 500:
        failures.append("no host bridge drawn in the screenshot")
    if any(f["pcie_type"] == "Root Port" for f in topo["functions"]) and near("bbdefb") < 500:
        failures.append("no Root Port drawn in the screenshot")
    if redirecting and near("d32f2f") < 100:
        failures.append("no ACS redirect mark in the screenshot")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
EOF
    echo "FAIL: $sysroot (Chromium's log: $work/$name.log)" >&2
    status=1
    trap - EXIT  # keep the files for a look
  else
    echo "ok: $sysroot"
  fi
  if [[ -n ${P2PAUDIT_SCREENSHOT_DIR:-} ]]; then cp "$work/$name.png" "$P2PAUDIT_SCREENSHOT_DIR/$name.png"; fi
done
exit $status
