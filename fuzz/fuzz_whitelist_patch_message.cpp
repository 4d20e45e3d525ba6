// SPDX-License-Identifier: GPL-2.0-or-later
// The whitelist patch's message (docs/security.md, "Patch text is git's text"): arbitrary bytes as
// every text field that reaches it (CPU vendor and model name, kernel release, IOMMU mode, the
// host bridge's and the devices' names, a copy's result and runtime and how it was run, a report's
// URL, the sender's name), split at NUL bytes. No line of the message may be structure to git
// (git_text.h, and a check of its own written from git's mailinfo.c and mailsplit.c), and the mbox
// read as git mailinfo reads it must give back the whole message.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_input.h"
#include "p2paudit/fleet/git_text.h"
#include "p2paudit/fleet/whitelist.h"
#include "p2paudit/input_file.h"
#include "p2paudit/kernel_rules.h"
#include "p2paudit/topology.h"

namespace {

using namespace p2paudit;

void check(bool ok) {
  if (!ok) std::abort();
}

bool starts(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// git mailinfo's patchbreak() (mailinfo.c), written out here on its own: "diff -", "Index: ", "--- x"
// or "---" with nothing but whitespace after it.
bool patch_break(std::string_view line) {
  if (starts(line, "diff -") || starts(line, "Index: ")) return true;
  if (!starts(line, "---")) return false;
  if (line.size() > 4 && line[3] == ' ' && line[4] != ' ' && line[4] != '\t' && line[4] != '\r') return true;
  return line.find_first_not_of(" \t\r", 3) == std::string_view::npos;
}

// A line git mailsplit could cut the mbox at, or unquote with --mboxrd (">From ").
bool mbox_from(std::string_view line) {
  size_t quotes = line.find_first_not_of('>');
  return quotes != std::string_view::npos && starts(line.substr(quotes), "From ");
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string no_spaces(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '\n') out += c;
  return out;
}

Function function(const char* bdf, uint16_t vendor, uint16_t device, PcieType type, uint32_t class_code) {
  Function f;
  f.bdf = *Bdf::parse(bdf);
  f.vendor = vendor, f.device = device;
  f.pcie_type = type;
  f.is_pcie = type != PcieType::kNotPcie;
  f.header_type = type == PcieType::kRootPort ? 1 : 0;
  f.class_code = class_code;
  f.config_size = f.config_readable = 4096;
  f.host_bridge = "pci0000:00";
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> field;
  std::string_view in = fuzz::text(data, size);
  for (size_t start = 0; field.size() < 12;) {
    size_t end = std::min(in.find('\0', start), in.size());
    field.emplace_back(in.substr(std::min(start, in.size()), end - std::min(start, in.size())));
    start = end + 1;
  }

  // The rule on each field alone: the line it makes is text to git and keeps the words.
  for (const auto& f : field) {
    std::string line = escape_line(f);
    std::string text = fleet::git_text_line(line);
    check(fleet::git_line_form(text) == fleet::GitLineForm::kText);
    check(!patch_break(text) && !mbox_from(text));
    check(no_spaces(text) == no_spaces(line));
  }

  // A host bridge with a Root Port and a GPU under it on either side, every name from the input.
  Topology topo;
  topo.platform.cpu_vendor = field[0];
  topo.platform.cpu_model_name = field[1];
  topo.platform.kernel_release = field[2];
  topo.platform.cpu_family = 6, topo.platform.cpu_model = 85;
  topo.functions.push_back(function("00:00.0", 0x8086, 0x1234, PcieType::kNotPcie, 0x060000));
  topo.functions[0].vendor_name = field[3];
  for (uint8_t port : {1, 6}) {
    size_t rp = topo.functions.size();
    Function r = function(port == 1 ? "00:01.0" : "00:06.0", 0x8086, 0x7000, PcieType::kRootPort, 0x060400);
    r.secondary_bus = r.subordinate_bus = port;
    topo.functions.push_back(r);
    Function gpu = function(port == 1 ? "01:00.0" : "06:00.0", 0x10de, 0x2330, PcieType::kEndpoint, 0x030200);
    gpu.parent = rp;
    gpu.device_name = field[4];
    gpu.driver = "nvidia";
    topo.functions[rp].children.push_back(topo.functions.size());
    topo.functions.push_back(gpu);
  }
  HostBridge hb;
  hb.name = "pci0000:00";
  hb.root_bus_devices = {0, 1, 3};
  topo.host_bridges.push_back(hb);

  KernelRules kernel;
  fleet::WhitelistCandidate c;
  c.vendor = 0x8086, c.device = 0x1234;
  c.name = field[5];
  c.copy_run = field[6];
  c.reports = {"https://example.org/" + field[7], field[7]};
  for (auto [provider, client] : {std::pair<size_t, size_t>{2, 4}, {4, 2}}) {
    fleet::UnlockedPair p;
    p.provider = provider, p.client = client;
    p.copy_result = field[8];
    p.copy_runtime = field[9];
    c.pairs.push_back(p);
  }
  c.pair_count = c.pairs.size();
  fleet::GitIdentity id;
  id.name = escape_line(field[10]), id.email = "a@example.org";
  fleet::CandidateContext context = fleet::candidate_context(topo, kernel);
  context.iommu_mode = field[11];
  fleet::PatchInput patch_in{topo, kernel, context, nullptr, id};

  const std::string message = fleet::commit_message(patch_in, c);
  auto lines = lines_of(message);
  check(lines.size() > 3 && lines[1].empty());
  size_t trailers = lines.size();
  while (trailers > 0 && !lines[trailers - 1].empty()) --trailers;
  for (size_t i = 0; i < lines.size(); ++i) {
    check(!patch_break(lines[i]) && !mbox_from(lines[i]));
    // Indented, no line may still be a scissors line; the body's lines are text as they stand.
    check(fleet::git_line_form("  " + std::string(lines[i])) == fleet::GitLineForm::kText);
    if (i < trailers) check(fleet::git_line_form(lines[i]) == fleet::GitLineForm::kText);
    else check(fleet::git_line_form(lines[i]) == fleet::GitLineForm::kTrailer);
  }
  check(starts(lines.back(), "Signed-off-by: "));
  check(message.find("=?") == std::string::npos || message.find("=?") > message.find('\n'));  // not in the subject

  // The mbox as git mailsplit and mailinfo read it: one message; its body ends at the tool's own
  // "---" and is the message's body, whole.
  const fleet::KernelPatch patch = fleet::kernel_patch(patch_in, c, "");
  auto mbox = lines_of(patch.mbox);
  size_t at = 1;
  for (; at < mbox.size() && !mbox[at].empty(); ++at) check(!mbox_from(mbox[at]));
  std::string body;
  for (++at; at < mbox.size() && !patch_break(mbox[at]); ++at) {
    check(!mbox_from(mbox[at]));
    body += std::string(mbox[at]) + "\n";
  }
  check(at < mbox.size() && mbox[at] == "---");
  check(body == message.substr(message.find("\n\n") + 2));
  return 0;
}
