/* SPDX-License-Identifier: GPL-2.0-or-later */
/* may_i_peer: what a framework asks before it tries peer-to-peer DMA, instead of trying and
 * watching it fail.
 *
 *   may_i_peer [--vendor-facts FILE] [--kernel X.Y] [SYSROOT [PROVIDER CLIENT]]
 *
 * SYSROOT: "/" (default, this machine), a snapshot directory or .tar.gz; the runtimes' answers a
 * snapshot stores (`p2paudit snapshot --probe`) are read as `p2paudit check` reads them.
 * --vendor-facts and --kernel are check's options of the same name. PROVIDER, CLIENT: BDFs or
 * names such as gpu0; by default the first two GPUs or accelerators. The answer is check's, and so
 * is the exit status: 0 when peer-to-peer may be attempted, 1 when not, 3 when facts nobody could
 * read decide it, 2 on error.
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

static const char *answer_name(p2paudit_answer a) {
  switch (a) {
    case P2PAUDIT_ANSWER_YES: return "yes";
    case P2PAUDIT_ANSWER_NO: return "no";
    default: return "unknown";
  }
}

int main(int argc, char **argv) {
  /* Every field not set here is 0 or NULL: the defaults `check` has (and no runtime is asked). */
  p2paudit_options options = P2PAUDIT_OPTIONS_INIT;
  int arg = 1;
  for (; arg + 1 < argc && strncmp(argv[arg], "--", 2) == 0; arg += 2) {
    if (strcmp(argv[arg], "--vendor-facts") == 0) options.vendor_facts = argv[arg + 1];
    else if (strcmp(argv[arg], "--kernel") == 0) options.kernel = argv[arg + 1];
    else break;
  }
  int rest = argc - arg;
  if ((arg < argc && strncmp(argv[arg], "--", 2) == 0) || (rest != 0 && rest != 1 && rest != 3)) {
    fprintf(stderr, "usage: %s [--vendor-facts FILE] [--kernel X.Y] [SYSROOT [PROVIDER CLIENT]]\n", argv[0]);
    return 2;
  }
  const char *sysroot = rest > 0 ? argv[arg] : "/";
  options.sysroot = sysroot;
  p2paudit_machine *machine = NULL;
  char *error = NULL;
  if (p2paudit_open_with(&options, &machine, &error) != P2PAUDIT_OK) {
    fprintf(stderr, "may_i_peer: %s\n", error ? error : "out of memory");
    p2paudit_string_free(error);
    return 2;
  }

  const char *pair[2] = {NULL, NULL};
  if (rest == 3) {
    pair[0] = argv[arg + 1];
    pair[1] = argv[arg + 2];
  } else if (first_two_compute_devices(machine, pair) != 2) {
    fprintf(stderr, "may_i_peer: %s has fewer than two GPUs or accelerators\n", sysroot);
    p2paudit_close(machine);
    return 2;
  }

  p2paudit_check_result result = P2PAUDIT_CHECK_INIT;
  if (p2paudit_check(machine, pair[0], pair[1], &result, NULL) != P2PAUDIT_OK) {
    fprintf(stderr, "may_i_peer: %s\n", p2paudit_last_error(machine));
    p2paudit_close(machine);
    return 2;
  }
  printf("%s -> %s: kernel %s, policy %s (%s; rule %s, authority %s; kernel rules of %s, libp2paudit %s)\n",
         pair[0], pair[1], verdict_name(result.verdict), decision_name(result.decision), answer_name(result.answer),
         *result.rule ? result.rule : "none", *result.authority ? result.authority : "none",
         p2paudit_kernel_release(machine), p2paudit_version());
  printf("  %s\n", result.reason);
  if (*result.remedy) printf("  fix: %s\n", result.remedy);
  p2paudit_close(machine);
  return result.answer == P2PAUDIT_ANSWER_YES ? 0 : result.answer == P2PAUDIT_ANSWER_NO ? 1 : 3;
}
