// SPDX-License-Identifier: GPL-2.0-or-later
// Facts a sysroot may not give, as pci_p2pdma_distance_many() is re-done over them: Model in
// p2pdma.cpp for a full verdict, and P2pdmaIndex (p2pdma_index.cpp) for the pairs it answers
// itself. Each evaluation assumes one value for each; the answer is known only where every
// assumption the decision depended on gives the same result. One set of bits for both, so that
// they explore the same assumptions the same way.
#pragma once

namespace p2paudit {

enum P2pdmaUnknown : unsigned {
  kAcsUnknown = 1,       // ACS control word not readable: assume every such device redirects
  kCpuUnknown = 2,       // boot CPU vendor/family or arch not known: assume AMD Zen
  kRootPortUnknown = 4,  // PCIe type of a root bus's first device not readable: assume Root Port
  kWhitelistUnknown = 8, // a whitelist entry this distribution build may or may not carry: assume it does
  kAllUnknowns = 15,
  // The index answers a pair only when no whitelist entry of its host bridges is in doubt (else it
  // takes the full verdict), so it explores the other three.
  kIndexUnknowns = kAcsUnknown | kCpuUnknown | kRootPortUnknown,
};

}  // namespace p2paudit
