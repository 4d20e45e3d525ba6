// SPDX-License-Identifier: GPL-2.0-or-later
// Bad input (a sysroot, a snapshot, a rule file) is reported as one InputError naming the place.
#pragma once

#include <stdexcept>
#include <string>

namespace p2paudit {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace p2paudit
