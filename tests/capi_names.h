// SPDX-License-Identifier: GPL-2.0-or-later
// The C library's enumerators by the names the tool's JSON gives them, for comparing the two.
#pragma once

#include "p2paudit.h"

namespace p2paudit::test {

inline const char* decision_name(p2paudit_decision d) {
  switch (d) {
    case P2PAUDIT_DECISION_PEER: return "peer";
    case P2PAUDIT_DECISION_HOST_STAGED: return "host_staged";
    case P2PAUDIT_DECISION_DENY: return "deny";
    case P2PAUDIT_DECISION_UNKNOWN: return "unknown";
  }
  return "not an enumerator";
}

inline const char* verdict_name(p2paudit_verdict v) {
  switch (v) {
    case P2PAUDIT_VERDICT_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case P2PAUDIT_VERDICT_BUS_ADDR: return "BUS_ADDR";
    case P2PAUDIT_VERDICT_THRU_HOST_BRIDGE: return "THRU_HOST_BRIDGE";
    case P2PAUDIT_VERDICT_UNKNOWN: return "UNKNOWN";
  }
  return "not an enumerator";
}

// check's answer and its exit status (0 yes, 1 no, 3 unknown).
inline const char* answer_name(p2paudit_answer a) {
  switch (a) {
    case P2PAUDIT_ANSWER_YES: return "yes";
    case P2PAUDIT_ANSWER_NO: return "no";
    case P2PAUDIT_ANSWER_UNKNOWN: return "unknown";
  }
  return "not an enumerator";
}

}  // namespace p2paudit::test
