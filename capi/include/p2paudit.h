/* SPDX-License-Identifier: GPL-2.0-or-later */
/* libp2paudit: may these two PCIe devices do peer-to-peer DMA on this machine?
 *
 * The same answers as `p2paudit check P C --format json` given the same inputs: the kernel's
 * pci_p2pdma_distance() verdict re-done for the machine's kernel release, and the policy's
 * decision (peer, host_staged, deny) from the topology, the rules, the runtimes' answers stored in
 * a snapshot (`snapshot --probe`) and a vendor facts file. The tool and the library read their
 * inputs through one function (probe/decision_inputs.h). The library asks the GPU runtimes (NVML,
 * CUDA, Level Zero, HIP) only when p2paudit_options.probe_runtimes says so, and never writes to
 * PCI config space or sysfs: it only reads. docs/library.md documents ownership, errors, threads
 * and the ABI promise.
 *
 * Ownership in one rule: a `const char *` result belongs to the library (valid until the handle
 * it came from is closed, or forever for p2paudit_version() and p2paudit_status_string()); a
 * `char *` result is the caller's, freed with p2paudit_string_free().
 *
 * libp2paudit is free software under the GNU General Public License, version 2 or (at your option)
 * any later version (LICENSE): a program that links it is a combined work under those terms. */
#ifndef P2PAUDIT_H
#define P2PAUDIT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define P2PAUDIT_API __attribute__((visibility("default")))
#else
#define P2PAUDIT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Every call's outcome. A call that fails leaves its outputs zeroed, NULL or unknown. */
typedef enum p2paudit_status {
  P2PAUDIT_OK = 0,
  P2PAUDIT_ERROR_ARGUMENT = 1,  /* a NULL that must not be, an index out of range */
  P2PAUDIT_ERROR_INPUT = 2,     /* the sysroot, snapshot or a rule file is missing or malformed */
  P2PAUDIT_ERROR_NO_DEVICE = 3, /* no such PCI function on the machine */
  P2PAUDIT_ERROR_MEMORY = 4,    /* out of memory */
  P2PAUDIT_ERROR_INTERNAL = 5   /* anything else: a bug, reported rather than thrown */
} p2paudit_status;

/* The kernel's answer, in the order of enum pci_p2pdma_map_type (drivers/pci/p2pdma.c). UNKNOWN
 * also means the sysroot cannot tell (ACS bits an unprivileged reader could not see, an unknown
 * CPU): the outcomes it allows differ. */
typedef enum p2paudit_verdict {
  P2PAUDIT_VERDICT_UNKNOWN = 0,
  P2PAUDIT_VERDICT_NOT_SUPPORTED = 1,    /* the kernel refuses P2PDMA between the two */
  P2PAUDIT_VERDICT_BUS_ADDR = 2,         /* through a PCIe switch, by bus address */
  P2PAUDIT_VERDICT_THRU_HOST_BRIDGE = 3  /* through the host bridge (root complex) */
} p2paudit_verdict;

/* The policy's decision (rules/policy/default.yaml and rules/advisories/ unless the rules
 * directory given says otherwise). UNKNOWN is only ever returned with an error. */
typedef enum p2paudit_decision {
  P2PAUDIT_DECISION_UNKNOWN = 0,
  P2PAUDIT_DECISION_PEER = 1,        /* peer-to-peer may be attempted */
  P2PAUDIT_DECISION_HOST_STAGED = 2, /* copy through system memory instead */
  P2PAUDIT_DECISION_DENY = 3         /* do not move data between the two */
} p2paudit_decision;

/* One machine as read, with its kernel rules and policy. Opaque. */
typedef struct p2paudit_machine p2paudit_machine;

/* One PCI function. Its strings belong to the machine handle. This struct is frozen for
 * libp2paudit.so.0: anything new comes with a new function, never a new field. */
typedef struct p2paudit_device {
  const char *bdf;          /* "0000:c1:00.0", the kernel's pci_name() */
  const char *name;         /* "gpu0", "accel1", "nvme0", "nic0", "ib0", "fpga0"; "" otherwise */
  const char *device_class; /* "gpu", "accelerator", "fpga", "nvme", "nic", "storage", "bridge", "other" */
  const char *vendor_name;  /* from pci.ids; "" when unknown */
  const char *device_name;  /* from pci.ids; "" when unknown */
  uint16_t vendor_id;
  uint16_t device_id;
  uint32_t class_code;      /* 24 bits: class, subclass, programming interface */
} p2paudit_device;

/* "0.1.0": the library's version. Never NULL; not to be freed. */
P2PAUDIT_API const char *p2paudit_version(void);

/* "ok", "invalid argument", ...: a constant string for the code; never NULL. */
P2PAUDIT_API const char *p2paudit_status_string(p2paudit_status status);

/* Reads a machine: p2paudit_open_with() given only these two options (so a snapshot's stored
 * runtime answers are read, and no runtime is asked). sysroot: "/" for this machine, a snapshot
 * directory, or a snapshot .tar.gz (`p2paudit snapshot`). rules_dir: a directory laid out like rules/ (kernel/, policy/,
 * advisories/), or NULL: $P2PAUDIT_RULES_DIR, else the rules installed with the library
 * (<libdir>/../share/p2paudit/rules). On success *machine is a handle to close with
 * p2paudit_close(). On failure *machine is NULL and, when error is not NULL, *error is a message
 * naming the file and the problem (free it with p2paudit_string_free()). */
P2PAUDIT_API p2paudit_status p2paudit_open(const char *sysroot, const char *rules_dir,
                                           p2paudit_machine **machine, char **error);

/* Frees the handle and every string it owns. NULL is allowed. */
P2PAUDIT_API void p2paudit_close(p2paudit_machine *machine);

/* The message of the last call on this handle that failed; "" when none has. Owned by the
 * handle, valid until the next call on it. */
P2PAUDIT_API const char *p2paudit_last_error(const p2paudit_machine *machine);

/* The machine's kernel release as the rules apply it ("6.8"); owned by the handle. */
P2PAUDIT_API const char *p2paudit_kernel_release(const p2paudit_machine *machine);

/* Every PCI function, in BDF order; 0 for NULL. */
P2PAUDIT_API size_t p2paudit_device_count(const p2paudit_machine *machine);

/* The function at index (0 .. count-1). */
P2PAUDIT_API p2paudit_status p2paudit_device_at(p2paudit_machine *machine, size_t index, p2paudit_device *device);

/* The index of a function named "DDDD:BB:DD.F", "BB:DD.F" or by its name ("gpu0"). */
P2PAUDIT_API p2paudit_status p2paudit_device_find(p2paudit_machine *machine, const char *spec, size_t *index);

/* The verdict and decision for DMA from provider's memory by client (each named as in
 * p2paudit_device_find()); p2paudit_check() gives check's whole answer. Each of verdict, decision
 * and details_json may be NULL when not wanted. *details_json is a JSON
 * object (docs/library.md): the decision with its rule, reason and remedy, the facts, and the
 * kernel's full reasoning; free it with p2paudit_string_free(). */
P2PAUDIT_API p2paudit_status p2paudit_pair(p2paudit_machine *machine, const char *provider, const char *client,
                                           p2paudit_verdict *verdict, p2paudit_decision *decision,
                                           char **details_json);

/* Everything `p2paudit [GLOBAL OPTIONS] check` takes, for p2paudit_open_with(). Versioned by its
 * size: set struct_size to sizeof(p2paudit_options) (P2PAUDIT_OPTIONS_INIT does) and every other
 * field to 0/NULL unless wanted; a later library that adds fields at the end reads only the ones
 * an older caller's struct_size covers, and takes the rest as 0/NULL. Lists are NULL-terminated
 * arrays of strings, NULL for none. Strings are read during the call only. Each field names the
 * tool's option it stands for. */
typedef struct p2paudit_options {
  size_t struct_size;                     /* sizeof(p2paudit_options) as the caller compiled it */
  const char *sysroot;                    /* --sysroot: "/", a snapshot directory or .tar.gz; NULL: "/" (or the dump) */
  const char *lspci_dump;                 /* --lspci-dump FILE (`lspci -xxxx`) instead of a sysroot */
  const char *dump_cpu;                   /* --dump-cpu VENDOR:FAMILY[:MODEL] or an architecture (with a dump) */
  const char *dump_iommu;                 /* --dump-iommu off|passthrough|translated (with a dump) */
  const char *const *dump_host_bridges;   /* --dump-host-bridge DDDD:BB... (with a dump) */
  const char *rules_dir;                  /* --rules-dir; NULL: as p2paudit_open() finds it */
  const char *kernel;                     /* --kernel X.Y[.Z]: the release whose rules apply */
  const char *const *kernel_rules;        /* --kernel-rules FILE...: extra kernel whitelist YAML */
  const char *const *assume_whitelisted;  /* --assume-whitelisted VVVV:DDDD[:same-host-bridge]... */
  const char *const *assume_acs_off;      /* --assume-acs-off SPEC...: as booted with pci=disable_acs_redir= */
  const char *const *policy_rules;        /* --rules FILE...: site policy or advisories (their own placement) */
  int no_default_rules;                   /* --no-default-rules: only policy_rules */
  const char *vendor_facts;               /* --vendor-facts FILE: JSON laid over the runtimes' answers */
  int ignore_stored_probe;                /* non-zero: leave a snapshot's stored runtime answers unread (the
                                           * tool always reads them) */
  int probe_runtimes;                     /* non-zero: ask the runtimes, in this process, when the sysroot is
                                           * "/" (the tool without --no-probe); 0: never (--no-probe) */
} p2paudit_options;

#define P2PAUDIT_OPTIONS_INIT {sizeof(p2paudit_options), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, 0}

/* Reads a machine as `p2paudit [OPTIONS] check` does. options NULL: all defaults ("/"). A
 * struct_size smaller than the first version's fields or larger than this library knows with
 * non-zero bytes past them is P2PAUDIT_ERROR_ARGUMENT. Otherwise as p2paudit_open(), which is
 * p2paudit_open_with() given only sysroot and rules_dir. */
P2PAUDIT_API p2paudit_status p2paudit_open_with(const p2paudit_options *options, p2paudit_machine **machine,
                                                char **error);

/* `check`'s tri-state answer to "may peer-to-peer be attempted?" (its exit status 0, 1, 3). */
typedef enum p2paudit_answer {
  P2PAUDIT_ANSWER_UNKNOWN = 0, /* unknown facts decide it (check exits 3); also alongside an error */
  P2PAUDIT_ANSWER_YES = 1,     /* peer, whatever the unknown facts are (check exits 0) */
  P2PAUDIT_ANSWER_NO = 2       /* not peer (check exits 1) */
} p2paudit_answer;

/* A pair's decision as `check PROVIDER CLIENT --format json` gives it. Strings belong to the
 * handle, valid until the next p2paudit_check() on it or its close. Versioned like
 * p2paudit_options: set struct_size before the call (P2PAUDIT_CHECK_INIT); the library fills
 * only the fields that struct_size covers. */
typedef struct p2paudit_check_result {
  size_t struct_size;            /* sizeof(p2paudit_check_result) as the caller compiled it */
  p2paudit_answer answer;        /* check's "answer" to --require peer */
  p2paudit_decision decision;    /* "decision" */
  p2paudit_verdict verdict;      /* "kernel"."map_type" */
  const char *rule;              /* "rule": the deciding rule's id; "" when none decided */
  const char *authority;         /* "authority" ("kernel", "vendor-driver", ...); "" when the rule names none */
  const char *reason;            /* "reason" */
  const char *remedy;            /* "remedy"; "" when none */
  /* Second version (p2paudit 0.2): decisions under uncertainty, as `check --format json` gives them. */
  int certain;                   /* "certain": 1 when no unknown fact could change the decision; 0 when it
                                    could, and `decision` is the safe side of what is still possible */
  unsigned possible;             /* "possible": bit (1 << P2PAUDIT_DECISION_x) for each decision still possible */
  const char *settled_by;        /* "settled_by": the facts that would settle it, with how to learn each,
                                    as check's text prints them; "" when certain */
} p2paudit_check_result;

#define P2PAUDIT_CHECK_INIT {sizeof(p2paudit_check_result), P2PAUDIT_ANSWER_UNKNOWN, P2PAUDIT_DECISION_UNKNOWN, P2PAUDIT_VERDICT_UNKNOWN, NULL, NULL, NULL, NULL, 0, 0u, NULL}

/* The answer for DMA from provider's memory by client, as `check` gives it. result must not be NULL
 * and its struct_size set; details_json (may be NULL) as p2paudit_pair()'s, with `check --format
 * json`'s "require" (peer), "satisfied", "answer" and "runtime_probe". */
P2PAUDIT_API p2paudit_status p2paudit_check(p2paudit_machine *machine, const char *provider, const char *client,
                                            p2paudit_check_result *result, char **details_json);

/* The kernel log explained against this machine's prediction, as `p2paudit log --format json`
 * gives it (docs/log.md, docs/schemas/log.schema.json): each P2PDMA refusal, ACS warning, IOMMU
 * fault, AER and Xid line with the pair it hit, the kernel verdict and policy decision for that
 * pair, and whether they agree. log_path: a saved `dmesg` or `journalctl -k` output (a regular
 * file), or NULL for the machine's own log: this boot's /dev/kmsg for the live machine ("/"), the
 * log a snapshot holds (`snapshot --with-log`); a capture without one is P2PAUDIT_ERROR_INPUT,
 * never explained by this machine's log. *json is the caller's (p2paudit_string_free()).
 * *contradictions (may be NULL) is the number of log lines that contradict a peer or allowed
 * prediction: the tool's own bug. A log that cannot be read is P2PAUDIT_ERROR_INPUT. Added in
 * P2PAUDIT_0.2. */
P2PAUDIT_API p2paudit_status p2paudit_explain_log(p2paudit_machine *machine, const char *log_path, char **json,
                                                  uint64_t *contradictions);

/* `watch` for a program: where this boot's kernel log stands now (/dev/kmsg's next record), taken
 * before the workload; then p2paudit_explain_log_since() explains what the workload added. On
 * failure (no /dev/kmsg, or kernel.dmesg_restrict for a user without CAP_SYSLOG)
 * P2PAUDIT_ERROR_INPUT and, when error is not NULL, *error says why (p2paudit_string_free()): the
 * prediction cannot be checked, which is not "no events". Added in P2PAUDIT_0.2. */
P2PAUDIT_API p2paudit_status p2paudit_log_position(uint64_t *position, char **error);

/* The live machine's kernel log from position on, explained as p2paudit_explain_log() does (the
 * document `watch --format json` writes, without its "watch" member). The machine must be this
 * machine ("/"): a capture's log has no position here (P2PAUDIT_ERROR_INPUT). Added in P2PAUDIT_0.2. */
P2PAUDIT_API p2paudit_status p2paudit_explain_log_since(p2paudit_machine *machine, uint64_t position, char **json,
                                                        uint64_t *contradictions);

/* Frees a string the library returned as `char *`. NULL is allowed. */
P2PAUDIT_API void p2paudit_string_free(char *string);

#ifdef __cplusplus
}
#endif

#endif /* P2PAUDIT_H */
