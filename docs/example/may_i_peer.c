/* SPDX-License-Identifier: GPL-2.0-or-later */
/* may_i_peer: what a framework asks before it tries peer-to-peer DMA, instead of trying and
 * watching it fail.
 *
 *   may_i_peer [SYSROOT [PROVIDER CLIENT]]
 *
 * SYSROOT: "/" (default, this machine), a snapshot directory or .tar.gz. PROVIDER, CLIENT: BDFs
 * or names such as gpu0; by default the first two GPUs or accelerators. Exit status: 0 when
 * peer-to-peer may be attempted, 1 when not, 2 on error.
 *
 * Build: cc may_i_peer.c $(pkg-config --cflags --libs p2paudit) -o may_i_peer */
#include <p2paudit.h>
#include <stdio.h>
#include <string.h>

static const char *verdict_name(p2paudit_verdict v) {
  switch (v) {
    case P2PAUDIT_VERDICT_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case P2PAUDIT_VERDICT_BUS_ADDR: return "BUS_ADDR";
    case P2PAUDIT_VERDICT_THRU_HOST_BRIDGE: return "THRU_HOST_BRIDGE";
    default: return "UNKNOWN";
  }
}

static const char *decision_name(p2paudit_decision d) {
  switch (d) {
    case P2PAUDIT_DECISION_PEER: return "peer";
    case P2PAUDIT_DECISION_HOST_STAGED: return "host_staged";
    case P2PAUDIT_DECISION_DENY: return "deny";
    default: return "unknown";
  }
}

/* The BDFs of the first two GPUs or accelerators, in the library's order (by BDF). */
static int first_two_compute_devices(p2paudit_machine *machine, const char *bdf[2]) {
  int found = 0;
  for (size_t i = 0; i < p2paudit_device_count(machine) && found < 2; ++i) {
    p2paudit_device device;
    if (p2paudit_device_at(machine, i, &device) != P2PAUDIT_OK) return -1;
    if (strcmp(device.device_class, "gpu") == 0 || strcmp(device.device_class, "accelerator") == 0)
      bdf[found++] = device.bdf;
  }
  return found;
}

int main(int argc, char **argv) {
  if (argc != 1 && argc != 2 && argc != 4) {
    fprintf(stderr, "usage: %s [SYSROOT [PROVIDER CLIENT]]\n", argv[0]);
    return 2;
  }
  const char *sysroot = argc > 1 ? argv[1] : "/";
  p2paudit_machine *machine = NULL;
  char *error = NULL;
  if (p2paudit_open(sysroot, NULL, &machine, &error) != P2PAUDIT_OK) {
    fprintf(stderr, "may_i_peer: %s\n", error ? error : "out of memory");
    p2paudit_string_free(error);
    return 2;
  }

  const char *pair[2] = {NULL, NULL};
  if (argc == 4) {
    pair[0] = argv[2];
    pair[1] = argv[3];
  } else if (first_two_compute_devices(machine, pair) != 2) {
    fprintf(stderr, "may_i_peer: %s has fewer than two GPUs or accelerators\n", sysroot);
    p2paudit_close(machine);
    return 2;
  }

  p2paudit_verdict verdict;
  p2paudit_decision decision;
  p2paudit_status status = p2paudit_pair(machine, pair[0], pair[1], &verdict, &decision, NULL);
  if (status != P2PAUDIT_OK) {
    fprintf(stderr, "may_i_peer: %s\n", p2paudit_last_error(machine));
    p2paudit_close(machine);
    return 2;
  }
  printf("%s -> %s: kernel %s, policy %s (kernel rules of %s, libp2paudit %s)\n", pair[0], pair[1],
         verdict_name(verdict), decision_name(decision), p2paudit_kernel_release(machine), p2paudit_version());
  p2paudit_close(machine);
  return decision == P2PAUDIT_DECISION_PEER ? 0 : 1;
}
