// SPDX-License-Identifier: GPL-2.0-or-later
// p2paudit-synth: writes a synthetic machine's sysroot (directory and/or .tar.gz) of any size, for
// tests and benchmarks (docs/performance.md).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "synth.h"

namespace fs = std::filesystem;
using namespace p2paudit::synth;

namespace {

constexpr int kExitError = 2;

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The release names files (boot/config-R): one plain path component, as the analyzer demands.
void check_release(const std::string& r) {
  bool ok = !r.empty() && r.size() <= 64 && r != "." && r != ".." &&
            std::all_of(r.begin(), r.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == '+' || c == '~';
            });
  if (!ok) throw UsageError(fmt::format("--kernel '{}' is not a kernel release (X.Y.Z[-suffix])", r));
}

void check_hostname(const std::string& h) {
  bool ok = !h.empty() && h.size() <= 64 && std::all_of(h.begin(), h.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
            });
  if (!ok) throw UsageError(fmt::format("--hostname '{}' is not a host name", h));
}

// An existing directory is written into only when empty, or after --force empties it.
void prepare_directory(const std::string& dir, bool force) {
  std::error_code ec;
  if (fs::is_symlink(dir, ec)) throw UsageError(fmt::format("{}: is a symlink; name the directory itself", dir));
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw UsageError(fmt::format("{}: exists and is not a directory", dir));
    if (!fs::is_empty(dir, ec)) {
      if (!force) throw UsageError(fmt::format("{}: exists and is not empty (--force replaces its contents)", dir));
      for (const auto& entry : fs::directory_iterator(dir)) fs::remove_all(entry.path());
    }
  } else if (!fs::create_directories(dir, ec)) {
    throw UsageError(fmt::format("{}: cannot create: {}", dir, ec.message()));
  }
}

void prepare_tarball(const std::string& file, bool force) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(file, ec)) && !force)
    throw UsageError(fmt::format("{}: exists (--force replaces it)", file));
  if (fs::is_symlink(file, ec) || (fs::exists(file, ec) && !fs::is_regular_file(file, ec)))
    throw UsageError(fmt::format("{}: is not a regular file; refusing to write through it", file));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"p2paudit-synth: writes a deterministic synthetic machine (PCIe tree, sysfs, /proc) as a sysroot\n"
               "directory and/or .tar.gz that p2paudit --sysroot and lspci -A linux-sysfs read. The same options\n"
               "give byte-identical output. Shape rules: docs/performance.md."};
  Options o;
  std::string out_dir, tarball, acs = "on", cpu = "amd";
  bool force = false, quiet = false;
  app.add_option("-o,--output", out_dir, "Directory to write the sysroot into (created; must be empty)");
  app.add_option("--tar", tarball, "Also (or, without -o, only) write the sysroot as FILE.tar.gz");
  app.add_flag("--force", force, "Empty an existing output directory / replace an existing tarball");
  app.add_option("--functions", o.functions,
                 "Exact total number of PCI functions (VFs included); unset shape options are chosen so that about "
                 "22% are GPUs, NVMe, NICs and accelerators")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--host-bridges", o.host_bridges, "Host bridges (root buses)");
  app.add_option("--root-ports", o.root_ports, "Root ports per host bridge");
  app.add_option("--depth", o.depth, "Switch levels below each root port (0: endpoints on the root port)");
  app.add_option("--fanout", o.fanout, "Downstream ports per switch");
  app.add_option("--endpoints-per-port", o.endpoints_per_port, "Endpoint devices on each leaf port's bus");
  app.add_option("--multifunction", o.multifunction, "Functions per endpoint device");
  app.add_option("--vfs", o.vfs, "VFs per SR-IOV-capable PF (the NICs)");
  app.add_option("--acs", acs, "ACS redirect (RR CR) on root and switch downstream ports; mixed: chosen per port by the seed")
      ->check(CLI::IsMember({"on", "off", "mixed"}));
  app.add_option("--seed", o.seed, "Seed of the pseudo-random choices (device mix, mixed ACS, serial numbers)");
  app.add_option("--kernel", o.kernel, "Kernel release written to osrelease and boot/config-RELEASE")->capture_default_str();
  app.add_option("--cpu", cpu, "Root complex and /proc/cpuinfo: AMD EPYC or Intel Xeon")->check(CLI::IsMember({"amd", "intel"}));
  app.add_option("--hostname", o.hostname, "proc/sys/kernel/hostname")->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "Print nothing on success");

  try {
    app.parse(argc, argv);
    if (out_dir.empty() && tarball.empty()) throw UsageError("nothing to write: give -o DIR and/or --tar FILE.tar.gz");
    check_release(o.kernel);
    check_hostname(o.hostname);
    o.acs = acs == "on" ? AcsMode::kOn : acs == "off" ? AcsMode::kOff : AcsMode::kMixed;
    o.cpu = cpu == "intel" ? CpuVendor::kIntel : CpuVendor::kAmd;
    Machine machine = Machine::plan(o);
    if (!out_dir.empty()) prepare_directory(out_dir, force);
    if (!tarball.empty()) prepare_tarball(tarball, force);
    if (!out_dir.empty()) machine.write_directory(out_dir);
    if (!tarball.empty()) machine.write_tarball(tarball);
    if (!quiet) {
      const Shape& s = machine.shape();
      const Counts& c = machine.counts();
      std::cout << fmt::format(
          "{} functions ({} P2P-relevant): {} host bridges x {} root ports, depth {}, fanout {}, {} endpoint(s) per "
          "port x {} function(s), {} VFs per NIC PF; {} root ports, {} switch upstream, {} switch downstream, {} "
          "endpoints, {} VFs, {} platform\n",
          c.functions, c.p2p_relevant, s.host_bridges, s.root_ports, s.depth, s.fanout, s.endpoints_per_port,
          s.multifunction, s.vfs, c.root_ports, c.switch_upstream, c.switch_downstream, c.endpoints, c.vfs, c.platform);
    }
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitError;
  } catch (const ShapeError& e) {
    std::cerr << "p2paudit-synth: " << e.what() << "\n";
    return kExitError;
  } catch (const UsageError& e) {
    std::cerr << "p2paudit-synth: " << e.what() << "\n";
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "p2paudit-synth: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
