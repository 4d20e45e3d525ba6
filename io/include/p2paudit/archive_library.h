// SPDX-License-Identifier: GPL-2.0-or-later
// libarchive, opened with dlopen() the first time an archive is read or written. Linked, it and
// its dependency chain (libxml2, ICU, libcrypto, nettle, acl, lzma, zstd, lz4, bz2) were loaded
// and relocated at every start: about 4 M instructions and 3,500 relocations, more than a small
// machine's whole audit from a directory, which never touches an archive. libarchive's headers
// still give every type and constant; only the functions come through this table.
#pragma once

#include <string>
#include <string_view>

#include <archive.h>
#include <archive_entry.h>

namespace p2paudit {

// Every libarchive function p2paudit calls: X(name) for each.
#define P2PAUDIT_ARCHIVE_FUNCTIONS(X)                                                             \
  X(archive_error_string)                                                                         \
  X(archive_read_new) X(archive_read_free) X(archive_read_support_filter_gzip)                    \
  X(archive_read_support_format_tar) X(archive_read_support_format_raw) X(archive_read_open_fd)   \
  X(archive_read_open) X(archive_read_open_memory) X(archive_read_next_header)                    \
  X(archive_read_data) X(archive_read_data_block)                                                 \
  X(archive_write_new) X(archive_write_free) X(archive_write_add_filter_gzip)                     \
  X(archive_write_set_filter_option) X(archive_write_set_format_gnutar)                           \
  X(archive_write_set_format_pax_restricted) X(archive_write_set_format_raw)                      \
  X(archive_write_set_bytes_in_last_block) X(archive_write_open_fd) X(archive_write_open2)        \
  X(archive_write_open_filename) X(archive_write_header) X(archive_write_data)                    \
  X(archive_write_close)                                                                          \
  X(archive_entry_new) X(archive_entry_free) X(archive_entry_clear) X(archive_entry_pathname)     \
  X(archive_entry_hardlink) X(archive_entry_symlink) X(archive_entry_filetype)                    \
  X(archive_entry_set_pathname) X(archive_entry_set_filetype) X(archive_entry_set_perm)           \
  X(archive_entry_set_size) X(archive_entry_set_mtime) X(archive_entry_set_symlink)

// The functions, typed by libarchive's own declarations and named as it names them, so that a
// call site reads as a libarchive call: `la.archive_read_new()`.
struct ArchiveLibrary {
#define P2PAUDIT_ARCHIVE_POINTER(name) decltype(&::name) name = nullptr;
  P2PAUDIT_ARCHIVE_FUNCTIONS(P2PAUDIT_ARCHIVE_POINTER)
#undef P2PAUDIT_ARCHIVE_POINTER
};

// The library, loaded once for the whole process (the first call, from any thread, loads it).
// When it cannot be loaded, or lacks one of the functions, every call throws InputError
// "cannot <verb> <file>: <why>", such as "cannot read m.tar.gz: libarchive.so.13 is not
// installed (apt install libarchive13)".
const ArchiveLibrary& archive_library(std::string_view verb, std::string_view file);

// One load of `soname` with nothing cached: the table, or in `error` why it cannot serve
// (archive_library() words its message from it).
struct ArchiveLibraryLoad {
  ArchiveLibrary functions;
  std::string error;
};
ArchiveLibraryLoad load_archive_library(const char* soname);

// Tests only: the soname archive_library() opens, when called before its first call in the
// process (a name that does not exist shows what a machine without libarchive says).
void set_archive_library_soname_for_tests(const char* soname);

}  // namespace p2paudit
