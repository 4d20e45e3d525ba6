// SPDX-License-Identifier: GPL-2.0-or-later
// pci.ids is parsed once per process (issue 21): every read, of a sysroot, a tarball or an lspci
// dump, on any thread (aggregate's workers), takes its names from one shared table, and those are
// the names libpci itself gives.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include <pci/pci.h>
}

#include "p2paudit/config_space.h"
#include "p2paudit/dump_topology.h"
#include "p2paudit/errors.h"
#include "p2paudit/fleet/aggregate.h"
#include "p2paudit/sysroot.h"
#include "p2paudit/topology_reader.h"
#include "temp_dir.h"
#include "test_support.h"

namespace p2paudit {
namespace {

namespace fs = std::filesystem;

// A libpci context of the test's own, set up as the tool's (no ~/.cache/pci-ids, no udev hwdb):
// the names libpci gives for each ID.
class FreshLibpci {
 public:
  FreshLibpci() : a_(pci_alloc()) { a_->id_lookup_mode &= ~PCI_LOOKUP_CACHE; }
  ~FreshLibpci() { pci_cleanup(a_); }
  FreshLibpci(const FreshLibpci&) = delete;
  FreshLibpci& operator=(const FreshLibpci&) = delete;
  std::string name(int flags, unsigned arg1, unsigned arg2 = 0) {
    char buf[256];
    const char* n = pci_lookup_name(a_, buf, sizeof buf, flags | PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB, arg1, arg2);
    return n ? n : "";
  }
  // The pci.ids libpci reads (it also tries the name with ".gz"); "" when neither exists.
  std::string ids_file() {
    (void)name(PCI_LOOKUP_VENDOR, 0);  // libpci settles the file's name when it first loads names
    if (!a_->id_file_name) return "";
    std::error_code ec;
    for (std::string f : {std::string(a_->id_file_name), std::string(a_->id_file_name) + ".gz"})
      if (fs::is_regular_file(f, ec)) return f;
    return "";
  }

 private:
  struct pci_access* a_;
};

void expect_libpci_names(FreshLibpci& libpci, const std::vector<Function>& functions, const std::string& where) {
  for (const Function& f : functions) {
    SCOPED_TRACE(where + " " + f.bdf.str());
    EXPECT_EQ(f.vendor_name, libpci.name(PCI_LOOKUP_VENDOR, f.vendor));
    EXPECT_EQ(f.device_name, libpci.name(PCI_LOOKUP_DEVICE, f.vendor, f.device));
    EXPECT_EQ(f.class_name, libpci.name(PCI_LOOKUP_CLASS, f.class_code >> 8));
  }
}

// Bytes this process has read through read() and the like (all its threads, ended ones included).
std::uint64_t bytes_read_by_process() {
  std::ifstream io("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return 0;
}

TEST(PciNames, SameAsLibpciGivesOnEveryCaptureAndDump) {
  FreshLibpci libpci;
  size_t named = 0;
  for (const auto& sysroot : test::fixture_sysroots()) {
    Topology t = read_topology(Sysroot::open(sysroot));
    expect_libpci_names(libpci, t.functions, sysroot);
    for (const Function& f : t.functions) named += !f.vendor_name.empty();
  }
  size_t dumps_read = 0;
  // lspci -x dumps: read whole by libpci's dump method (top level) or decoded a function at a time
  // from what the dump holds (pasted/, as `--lspci-dump` reads every dump).
  for (const auto& e : fs::recursive_directory_iterator(test::data_path("lspci-dumps"))) {
    if (!e.is_regular_file() || e.path().extension() == ".md") continue;
    const std::string dump = e.path().string();
    if (e.path().parent_path().filename() == "lspci-dumps") {
      std::vector<Finding> findings;
      expect_libpci_names(libpci, read_config_dump(dump, findings), dump);
    }
    try {
      expect_libpci_names(libpci, read_dump_topology(dump, {}).functions, dump);
      ++dumps_read;
    } catch (const InputError&) {  // the corpus holds dumps made to be refused (lspci -v text...)
    }
  }
  EXPECT_GT(dumps_read, 10u);
  if (!libpci.ids_file().empty()) EXPECT_GT(named, 0u) << "pci.ids is there, yet no function got a vendor name";
  EXPECT_LE(pci_name_list_loads(), 1u);
}

TEST(PciNames, ParsedOnceAcrossReadsAndThreads) {
  const auto captures = test::fixture_sysroots();
  ASSERT_GE(captures.size(), 4u);
  EXPECT_LE(pci_name_list_loads(), 1u);
  (void)read_topology(Sysroot::open(captures.front()));  // the first names: the one parse
  ASSERT_EQ(pci_name_list_loads(), 1u);

  // The same again and again, from the main thread and from four at once.
  std::uint64_t read_before = bytes_read_by_process(), input_bytes = 0;
  for (int round = 0; round < 3; ++round)
    for (const auto& c : captures) {
      (void)read_topology(Sysroot::open(c));
      input_bytes += fs::file_size(c);
    }
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&] {
      for (const auto& c : captures) (void)read_topology(Sysroot::open(c));
    });
  for (auto& r : readers) r.join();
  for (const auto& c : captures) input_bytes += 4 * fs::file_size(c);
  std::vector<Finding> findings;
  (void)decode_config_bytes(Bdf{0, 1, 0, 0}, std::vector<uint8_t>(64, 0x11), findings);
  EXPECT_EQ(pci_name_list_loads(), 1u);

  // An independent witness, in bytes read rather than in the counter: had each read parsed
  // pci.ids, the process would have read it once per read.
  const std::uint64_t grown = bytes_read_by_process() - read_before;
  FreshLibpci libpci;  // parses pci.ids itself: after the count
  // Not under a sanitizer, whose runtime reads files of its own.
  if (std::string ids = libpci.ids_file(); !ids.empty() && read_before > 0 && !test::kSanitized) {
    EXPECT_LT(grown, input_bytes + fs::file_size(ids))
        << (7 * captures.size()) << " reads of " << input_bytes << " bytes read " << grown << " bytes";
  }

  // aggregate's workers: several inputs on four threads, still the one parse.
  test::TempDir dir;
  for (size_t i = 0; i < 6; ++i) fs::copy_file(captures[i % captures.size()], dir / ("m" + std::to_string(i) + ".tar.gz"));
  fleet::AggregateOptions options;
  options.rules_dir = test::rules_source();
  options.jobs = 4;
  auto result = fleet::aggregate({dir.path().string()}, options);
  EXPECT_GE(result.inputs_read, 4u);
  EXPECT_EQ(pci_name_list_loads(), 1u);
}

}  // namespace
}  // namespace p2paudit
