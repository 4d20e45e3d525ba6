// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/sysroot.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <forward_list>
#include <list>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/archive_library.h"
#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"

namespace fs = std::filesystem;

namespace p2paudit {

namespace {

enum class Kind { kMissing, kDirectory, kFile, kSymlink, kOther };

std::vector<std::string> split_path(std::string_view p) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    if (end > start) {
      std::string_view part = p.substr(start, end - start);
      if (part != ".") parts.emplace_back(part);
    }
    start = end + 1;
  }
  return parts;
}

// A name within one directory that stands for an entry of it (not "." or "..").
bool is_plain_name(std::string_view name) { return !name.empty() && name != "." && name != ".."; }

// No empty, "." or ".." component: split_path() and a join give the same text back.
bool is_plain_path(std::string_view p) {
  if (p.empty()) return false;
  for (size_t start = 0;;) {
    size_t end = p.find('/', start);
    std::string_view part = p.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!is_plain_name(part)) return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

// The path names the top of the sysroot itself: nothing but slashes and "." components.
bool names_top(std::string_view p) {
  for (size_t start = 0; start <= p.size();) {
    size_t end = std::min(p.find('/', start), p.size());
    std::string_view part = p.substr(start, end - start);
    if (!part.empty() && part != ".") return false;
    start = end + 1;
  }
  return true;
}

std::string join_parts(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    if (&part != &parts.front()) out += '/';
    out += part;
  }
  return out;
}

size_t joined_size(std::string_view dir, std::string_view name) { return dir.empty() ? name.size() : dir.size() + 1 + name.size(); }
// "dir/name" (or "name" in the top) appended to out.
std::string& append_joined(std::string& out, std::string_view dir, std::string_view name) {
  if (!dir.empty()) (out += dir) += '/';
  return out += name;
}
std::string join(std::string_view dir, std::string_view name) {
  std::string out;
  out.reserve(joined_size(dir, name));
  return append_joined(out, dir, name);
}

[[noreturn]] void too_large(const std::string& origin, const std::string& rel, size_t limit) {
  throw InputError(fmt::format("{}: {}: larger than the limit of {} bytes for one file", origin, escape_text(rel), limit));
}

}  // namespace

// Where the bytes live. Paths given to a backend are already resolved: every component but the
// last is a real directory, relative to the tree's root.
class Sysroot::Backend {
 public:
  virtual ~Backend() = default;
  virtual bool live() const { return false; }
  virtual bool archive() const { return false; }
  virtual ArchiveReader reader() const { return ArchiveReader::kLibarchive; }
  virtual Kind kind(const std::string& path) const = 0;
  virtual std::optional<std::string> link_target(const std::string& path) const = 0;
  // A regular file's bytes, at most max + 1 of them (so the caller can tell "too large").
  virtual std::optional<std::string> read(const std::string& path, size_t max) const = 0;
  // read() of a path whose last component may be a link: then `link` is set and nothing is read
  // (the caller resolves it). A backend that learns it while opening saves a lookup per file.
  virtual std::optional<std::string> read_unless_link(const std::string& path, size_t max, bool& link) const {
    link = kind(path) == Kind::kSymlink;
    return link ? std::nullopt : read(path, max);
  }
  // The calls above for the entry `name` of the resolved directory `dir`, without the caller
  // joining them: a backend that keeps its directories open looks the name up in one.
  virtual Kind kind_in(const std::string& dir, std::string_view name) const { return kind(joined(dir, name)); }
  // The target of `name` when it is a link, else nullopt.
  virtual std::optional<std::string> link_target_in(const std::string& dir, std::string_view name) const {
    const std::string& path = joined(dir, name);
    return kind(path) == Kind::kSymlink ? link_target(path) : std::nullopt;
  }
  virtual std::optional<std::string> read_in(const std::string& dir, std::string_view name, size_t max, bool& link) const {
    return read_unless_link(joined(dir, name), max, link);
  }
  // Sysroot::read_pieces() of the entry `name` of `dir`: by default the file read whole.
  virtual bool read_pieces_in(const std::string& dir, std::string_view name, size_t max,
                              const std::function<void(const PieceRead&)>& use, bool& link) const {
    auto data = read_in(dir, name, max, link);
    if (!data) return false;
    use(pieces_of(*data, max));
    return true;
  }
  // A reader of pieces of bytes held in memory (the first max of them).
  static PieceRead pieces_of(const std::string& data, size_t max) {
    const size_t held = std::min(data.size(), max);
    return [&data, held](size_t offset, uint8_t* out, size_t size) -> size_t {
      if (offset >= held) return 0;
      const size_t n = std::min(size, held - offset);
      std::memcpy(out, data.data() + offset, n);
      return n;
    };
  }
  // The file `name` of the subdirectory `sub` of `dir`, the one file read there (an IOMMU
  // group's `type`): a backend may read it without opening or listing `sub`. `handled` false:
  // this backend cannot tell (or `sub` is no plain directory) and the caller reads it as usual.
  virtual std::optional<std::string> read_below(const std::string&, std::string_view, std::string_view, size_t,
                                                bool& handled) const {
    handled = false;
    return std::nullopt;
  }
  virtual std::optional<uint64_t> size(const std::string& path) const = 0;
  virtual std::vector<std::string> list(const std::string& path, size_t max) const = 0;
  virtual std::optional<fs::path> host_path(const std::string&) const { return std::nullopt; }

 private:
  // dir/name in a buffer kept between calls (the calls above are leaves: none re-enters another).
  const std::string& joined(std::string_view dir, std::string_view name) const {
    scratch_.clear();
    return append_joined(scratch_, dir, name);
  }
  mutable std::string scratch_;
};

namespace {

// A name as the C string a system call takes, on the stack. A name longer than NAME_MAX is
// refused (false), as the kernel would refuse it (ENAMETOOLONG): no directory holds one.
class CName {
 public:
  explicit CName(std::string_view name) {
    if (name.size() > NAME_MAX) return;
    std::memcpy(text_, name.data(), name.size());
    text_[name.size()] = '\0';
    ok_ = true;
  }
  explicit operator bool() const { return ok_; }
  const char* get() const { return text_; }

 private:
  char text_[NAME_MAX + 1];
  bool ok_ = false;
};

// A directory on this machine (the live "/" or a snapshot directory). Every component is opened
// with O_NOFOLLOW below a descriptor of the root, so a link swapped in behind our back fails the
// open instead of leading out.
//
// Each directory opened is listed once (getdents64): the reader asks for a dozen files in each
// function's directory, and the listing's d_type answers what they are, so a file is opened only
// when it is there, a link is read without a stat first, and an absent file costs no system call.
// A file the listing calls regular is opened O_NOFOLLOW|O_NONBLOCK and read without fstat: a link
// swapped in fails the open; a FIFO (device nodes need CAP_MKNOD) opens without blocking and reads
// as empty or EAGAIN (refused). Where d_type is DT_UNKNOWN the file is fstat'ed as before.
class DirectoryBackend : public Sysroot::Backend {
 public:
  DirectoryBackend(Fd root, fs::path host_root, bool live) : host_root_(std::move(host_root)), live_(live) {
    root_.fd = std::move(root);
  }
  bool live() const override { return live_; }

  Kind kind(const std::string& path) const override {
    if (path.empty()) return Kind::kDirectory;
    auto [dir, name] = open_parent(path);
    if (!dir) return Kind::kMissing;
    return entry_kind(*dir, name);
  }
  Kind kind_in(const std::string& dir, std::string_view name) const override {
    Dir* d = open_directory(dir);
    return d ? entry_kind(*d, name) : Kind::kMissing;
  }

  std::optional<std::string> link_target(const std::string& path) const override {
    auto [dir, name] = open_parent(path);
    return dir ? target_in(*dir, name) : std::nullopt;
  }
  std::optional<std::string> link_target_in(const std::string& dir, std::string_view name) const override {
    Dir* d = open_directory(dir);
    return d ? target_in(*d, name) : std::nullopt;
  }

  std::optional<std::string> read(const std::string& path, size_t max) const override {
    bool link = false;
    return read_unless_link(path, max, link);
  }
  std::optional<std::string> read_unless_link(const std::string& path, size_t max, bool& link) const override {
    auto [dir, name] = open_parent(path);
    return dir ? read_at(*dir, name, max, link) : std::nullopt;
  }
  std::optional<std::string> read_in(const std::string& dir, std::string_view name, size_t max, bool& link) const override {
    Dir* d = open_directory(dir);
    return d ? read_at(*d, name, max, link) : std::nullopt;
  }

  // The live machine's file through one descriptor, read with pread() where asked; a captured
  // tree's file whole (its bytes cost nothing more to read, and one read is one system call).
  bool read_pieces_in(const std::string& dir, std::string_view name, size_t max,
                      const std::function<void(const Sysroot::PieceRead&)>& use, bool& link) const override {
    if (!live_) return Backend::read_pieces_in(dir, name, max, use, link);
    Dir* d = open_directory(dir);
    if (!d) return false;
    Kind k = d->listed ? entry_kind(*d, name, /*stat_unknown=*/false) : Kind::kOther;
    if (k == Kind::kSymlink) link = true;
    if (k == Kind::kMissing || k == Kind::kSymlink || k == Kind::kDirectory) return false;
    CName c(name);
    if (!c) return false;
    Fd fd(::openat(d->fd.get(), c.get(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    struct stat st{};
    if (fd.get() < 0) {
      if (errno == ELOOP) link = true;
      return false;
    }
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    use([&fd, max](size_t offset, uint8_t* out, size_t size) -> size_t {
      if (offset >= max) return 0;
      size = std::min(size, max - offset);
      size_t done = 0;
      for (int reads = 0; done < size && reads < 64; ++reads) {  // sysfs may return less than asked
        ssize_t n = ::pread(fd.get(), out + done, size - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
      return done;
    });
    return true;
  }

  // `sub` is not opened (nor listed) for one file: the file is opened from `dir` with
  // openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH), which refuses every link on the way and any
  // step out, and fstat'ed. Anything unusual (a link, an old kernel without openat2) is left to
  // the caller's ordinary path.
  std::optional<std::string> read_below(const std::string& dir, std::string_view sub, std::string_view name, size_t max,
                                        bool& handled) const override {
    handled = false;
    Dir* parent = open_directory(dir);
    if (!parent || !parent->listed || entry_kind(*parent, sub, false) != Kind::kDirectory) return std::nullopt;
    if (sub.size() > NAME_MAX || name.size() > NAME_MAX) return std::nullopt;
    char below[2 * NAME_MAX + 2];
    std::memcpy(below, sub.data(), sub.size());
    below[sub.size()] = '/';
    std::memcpy(below + sub.size() + 1, name.data(), name.size());
    below[sub.size() + 1 + name.size()] = '\0';
    struct open_how how{};
    how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH;
    Fd fd(openat2_missing_ ? -1 : static_cast<int>(::syscall(SYS_openat2, parent->fd.get(), below, &how, sizeof how)));
    if (!openat2_missing_ && fd.get() < 0 && errno == ENOSYS) openat2_missing_ = true;  // before 5.6
    if (openat2_missing_) {
      // The same two steps by hand: `sub` without following a link, then the file likewise.
      CName sub_name(sub), file_name(name);
      Fd sub_fd(::openat(parent->fd.get(), sub_name.get(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub_fd.get() >= 0)
        fd = Fd(::openat(sub_fd.get(), file_name.get(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    }
    if (fd.get() < 0) {
      handled = errno == ENOENT;
      return std::nullopt;
    }
    handled = true;
    return read_open(fd, max, false);
  }

  // The bytes of an open file, at most max + 1. known_regular: the listing said so, else fstat
  // decides (and gives a captured file's true size).
  std::optional<std::string> read_open(const Fd& fd, size_t max, bool known_regular) const {
    uint64_t expected = UINT64_MAX;  // sysfs and procfs report sizes that are not what they hold
    if (!known_regular) {
      struct stat st{};
      if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
      if (!live_) expected = static_cast<uint64_t>(st.st_size);  // a captured tree's sizes are true
    }
    // A regular file of a captured tree (a plain file system) returns less than asked only at its
    // end: one read for a small file. sysfs and procfs are read to EOF (seq_file stops short).
    return read_bounded(fd.get(), max, {.first_read = kFirstRead, .step = kFirstRead, .known_size = expected,
                                        .short_read_ends = !live_});
  }

  std::optional<uint64_t> size(const std::string& path) const override {
    auto [dir, name] = open_parent(path);
    if (!dir) return std::nullopt;
    if (dir->listed && entry_kind(*dir, name, false) == Kind::kMissing) return std::nullopt;
    CName c(name);
    Fd fd(c ? ::openat(dir->fd.get(), c.get(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) : -1);
    struct stat st{};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    return static_cast<uint64_t>(st.st_size);
  }

  std::vector<std::string> list(const std::string& path, size_t max) const override {
    std::vector<std::string> names;
    Dir* dir = open_directory(path);
    if (!dir) return names;
    if (dir->listed) {
      if (dir->entries.size() > max) throw InputError(fmt::format("{}: more than {} entries", escape_text(path), max));
      names.reserve(dir->entries.size());
      for (const auto& e : dir->entries) names.emplace_back(name_of(*dir, e));
      return names;
    }
    // Not listable through its own descriptor (O_PATH: no read permission) or too large to keep.
    int fd = ::openat(dir->fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return names;
    DIR* d = ::fdopendir(fd);
    if (!d) {
      ::close(fd);
      return names;
    }
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (names.size() >= max) {
        ::closedir(d);
        throw InputError(fmt::format("{}: more than {} entries", escape_text(path), max));
      }
      names.push_back(std::move(name));
    }
    ::closedir(d);
    return names;
  }

  std::optional<fs::path> host_path(const std::string& path) const override {
    return path.empty() ? host_root_ : host_root_ / path;
  }

 private:
  struct Entry {
    uint64_t key;   // order_key() of its name
    uint32_t at;    // its name in Dir::names
    uint32_t size;
    Kind kind;      // from d_type; kOther stands for DT_UNKNOWN until fstatat answers
    bool known;
  };
  struct Dir {
    Fd fd;
    bool listed = false;         // entries hold the whole directory
    std::string names;           // the entries' names one after another: one allocation, not one a name
    std::vector<Entry> entries;  // sorted by name
    std::list<std::string_view>::iterator lru;
  };
  static std::string_view name_of(const Dir& dir, const Entry& e) { return {dir.names.data() + e.at, e.size}; }
  // A name's first 8 bytes as a number, zero-padded: entries are ordered by it, then by the whole
  // name, so that most comparisons of the sort and of a lookup compare two numbers. (For names
  // without a NUL byte, which a listing never holds, that is the names' own order.)
  static uint64_t order_key(std::string_view name) {
    uint64_t key = 0;
    if (name.size() >= 8) {
      std::memcpy(&key, name.data(), 8);
      return std::endian::native == std::endian::little ? __builtin_bswap64(key) : key;
    }
    for (size_t i = 0; i < 8; ++i) key = key << 8 | (i < name.size() ? static_cast<unsigned char>(name[i]) : 0u);
    return key;
  }
  static bool before(const Dir& dir, const Entry& e, uint64_t key, std::string_view name) {
    return e.key != key ? e.key < key : name_of(dir, e) < name;
  }

  // Kind of `name` in an open directory: from its listing when it has one (DT_UNKNOWN is
  // fstatat'ed once, unless stat_unknown is false: the caller opens it and fstats then).
  Kind entry_kind(Dir& dir, std::string_view name, bool stat_unknown = true) const {
    if (dir.listed) {
      const uint64_t key = order_key(name);
      auto it = std::lower_bound(dir.entries.begin(), dir.entries.end(), name,
                                 [&](const Entry& e, std::string_view n) { return before(dir, e, key, n); });
      if (it == dir.entries.end() || it->key != key || name_of(dir, *it) != name) return Kind::kMissing;
      if (it->known || !stat_unknown) return it->kind;
      it->kind = stat_kind(dir.fd.get(), name);
      it->known = true;
      return it->kind;
    }
    return stat_kind(dir.fd.get(), name);
  }

  static Kind stat_kind(int dir, std::string_view name) {
    CName c(name);
    struct stat st{};
    if (!c || ::fstatat(dir, c.get(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Kind::kMissing;
    if (S_ISDIR(st.st_mode)) return Kind::kDirectory;
    if (S_ISREG(st.st_mode)) return Kind::kFile;
    if (S_ISLNK(st.st_mode)) return Kind::kSymlink;
    return Kind::kOther;
  }

  std::optional<std::string> target_in(Dir& dir, std::string_view name) const {
    if (dir.listed && entry_kind(dir, name) != Kind::kSymlink) return std::nullopt;
    CName c(name);
    char buf[4097];
    ssize_t n = c ? ::readlinkat(dir.fd.get(), c.get(), buf, sizeof buf) : -1;
    if (n < 0 || static_cast<size_t>(n) >= sizeof buf) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }

  // A file of an open directory, opened at once: the listing says whether it is there and
  // what it is, so nothing is looked at first.
  std::optional<std::string> read_at(Dir& dir, std::string_view name, size_t max, bool& link) const {
    Kind k = dir.listed ? entry_kind(dir, name, /*stat_unknown=*/false) : Kind::kOther;
    if (k == Kind::kSymlink) link = true;
    if (k == Kind::kMissing || k == Kind::kSymlink || k == Kind::kDirectory) return std::nullopt;
    const bool known_regular = k == Kind::kFile;  // else (DT_UNKNOWN, not listed) fstat decides
    CName c(name);
    if (!c) return std::nullopt;
    Fd fd(::openat(dir.fd.get(), c.get(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ELOOP) link = true;
      return std::nullopt;
    }
    return read_open(fd, max, known_regular);
  }

  // The whole directory through its own descriptor, bounded; false (not listed) when it cannot
  // be read or holds more than kMaxListed entries (then each name is looked up by itself).
  static bool fill_listing(Dir& dir) {
    alignas(8) static thread_local char buf[32768];
    std::vector<Entry> entries;
    std::string names;
    for (;;) {
      ssize_t n = ::getdents64(dir.fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;
      if (n == 0) break;
      // A record takes at least 24 bytes (its header and name, 8-byte aligned).
      entries.reserve(entries.size() + static_cast<size_t>(n) / 24);
      names.reserve(names.size() + static_cast<size_t>(n));
      for (ssize_t at = 0; at < n;) {
        auto* e = reinterpret_cast<struct dirent64*>(buf + at);
        at += e->d_reclen;
        const char* name = e->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        if (entries.size() >= kMaxListed) return false;
        Kind k = e->d_type == DT_DIR ? Kind::kDirectory : e->d_type == DT_REG ? Kind::kFile
               : e->d_type == DT_LNK ? Kind::kSymlink : Kind::kOther;
        const size_t size = std::strlen(name);
        entries.push_back({order_key({name, size}), static_cast<uint32_t>(names.size()), static_cast<uint32_t>(size), k,
                           e->d_type != DT_UNKNOWN});
        names.append(name, size);
      }
    }
    dir.names = std::move(names);
    std::sort(entries.begin(), entries.end(),
              [&](const Entry& a, const Entry& b) { return before(dir, a, b.key, name_of(dir, b)); });
    dir.entries = std::move(entries);
    dir.listed = true;
    return true;
  }

  // Opens the directory `path` one component at a time without following links, from the
  // nearest directory already open, and lists it: reads come in runs from the same functions'
  // directories. The most recently used kMaxOpenDirs stay open.
  Dir* open_directory(std::string_view path) const {
    if (path.empty()) {
      if (!root_tried_) {  // the root's descriptor was opened O_RDONLY by Sysroot::open: listable
        root_tried_ = true;
        fill_listing(root_);
      }
      return &root_;
    }
    if (last_dir_ && path == *last_path_) return last_dir_;  // reads come in runs from one directory
    if (auto it = dirs_.find(path); it != dirs_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      last_path_ = &it->first;
      return last_dir_ = &it->second;
    }
    auto slash = path.rfind('/');
    Dir* parent = open_directory(slash == std::string_view::npos ? std::string_view() : path.substr(0, slash));
    if (!parent) return nullptr;
    std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
    if (parent->listed) {
      Kind k = entry_kind(*parent, name, false);
      if (k == Kind::kMissing || k == Kind::kFile || k == Kind::kSymlink) return nullptr;
    }
    CName c(name);
    if (!c) return nullptr;
    Fd fd(::openat(parent->fd.get(), c.get(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    bool listable = fd.get() >= 0;
    if (!listable && errno == EACCES)  // a directory we may search but not read
      fd = Fd(::openat(parent->fd.get(), c.get(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) return nullptr;
    // parent is not used past this point: evicting it is safe.
    last_dir_ = nullptr;
    while (dirs_.size() >= kMaxOpenDirs) {
      auto oldest = dirs_.find(lru_.back());  // found while the view still names a live key
      lru_.pop_back();
      dirs_.erase(oldest);
    }
    auto [it, inserted] = dirs_.try_emplace(std::string(path));
    lru_.push_front(it->first);
    Dir& dir = it->second;
    dir.fd = std::move(fd);
    dir.lru = lru_.begin();
    if (listable) fill_listing(dir);
    last_path_ = &it->first;
    return last_dir_ = &dir;
  }

  std::pair<Dir*, std::string_view> open_parent(std::string_view path) const {
    auto slash = path.rfind('/');
    if (slash == std::string_view::npos) return {open_directory({}), path};
    return {open_directory(path.substr(0, slash)), path.substr(slash + 1)};
  }

  static constexpr size_t kFirstRead = 8192;
  static constexpr size_t kMaxListed = 1 << 16;
  fs::path host_root_;
  bool live_;
  static constexpr size_t kMaxOpenDirs = 256;
  mutable Dir root_;
  mutable bool root_tried_ = false;
  mutable bool openat2_missing_ = false;  // the kernel answered ENOSYS once
  mutable std::unordered_map<std::string, Dir, Sysroot::TextHash, std::equal_to<>> dirs_;
  mutable std::list<std::string_view> lru_;  // dirs_'s keys, most recently used first
  mutable const std::string* last_path_ = nullptr;  // the directory open_directory() gave last
  mutable Dir* last_dir_ = nullptr;
};

// Bytes that live as long as an archive backend (entry names, link targets, file data): carved
// from large blocks, so that 100k entries cost a few allocations instead of 100k, and freeing them
// costs as few.
class Arena {
 public:
  char* allocate(size_t n) {
    // A large piece has a block of its own, and the current block goes on: the most left unused
    // is a quarter of a block per block.
    if (n > kBlock / 4) return blocks_.emplace_back(new char[n]).get();  // not zeroed: all written
    if (n > left_) {
      next_ = blocks_.emplace_back(new char[kBlock]).get();
      left_ = kBlock;
    }
    char* p = next_;
    next_ += n;
    left_ -= n;
    return p;
  }
  std::string_view copy(std::string_view s) {
    if (s.empty()) return {};
    char* p = allocate(s.size());
    std::memcpy(p, s.data(), s.size());
    return {p, s.size()};
  }

 private:
  static constexpr size_t kBlock = 1 << 20;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* next_ = nullptr;
  size_t left_ = 0;
};

// One entry of an archive as the tar format gives it, before our checks: the same whether the
// header was read by libarchive or by the tar walk below.
struct TarEntry {
  std::string_view name;
  const char* hardlink = nullptr;  // NUL-terminated, or nullptr when not a hard link
  unsigned type = 0;               // AE_IFREG, AE_IFDIR, ...
  const char* symlink = nullptr;   // NUL-terminated target, or nullptr
};

// A snapshot archive read in one pass into memory: nothing is written to disk, so nothing can be
// redirected, and nothing is left behind when the tool is interrupted.
class ArchiveBackend : public Sysroot::Backend {
 public:
  bool archive() const override { return true; }

  Kind kind(const std::string& path) const override {
    if (path.empty()) return Kind::kDirectory;
    const Entry* e = find(path);
    return e ? e->kind : Kind::kMissing;
  }
  std::optional<std::string> link_target(const std::string& path) const override {
    const Entry* e = find(path);
    if (!e || e->kind != Kind::kSymlink) return std::nullopt;
    return std::string(e->bytes);
  }
  std::optional<std::string> read(const std::string& path, size_t max) const override {
    const Entry* e = find(path);
    if (!e || e->kind != Kind::kFile) return std::nullopt;
    return std::string(e->bytes.substr(0, max + 1));
  }
  std::optional<std::string> read_unless_link(const std::string& path, size_t max, bool& link) const override {
    const Entry* e = find(path);  // one lookup where kind() then read() would take two
    if (e && e->kind == Kind::kSymlink) link = true;
    if (!e || e->kind != Kind::kFile) return std::nullopt;
    return std::string(e->bytes.substr(0, max + 1));
  }
  std::optional<uint64_t> size(const std::string& path) const override {
    const Entry* e = find(path);
    if (!e || e->kind != Kind::kFile) return std::nullopt;
    return e->bytes.size();
  }
  std::vector<std::string> list(const std::string& path, size_t) const override {
    if (kind(path) != Kind::kDirectory) return {};
    const uint32_t children = path.empty() ? kRootChildren : find(path)->children;
    if (children == kNoChildren) return {};
    std::vector<std::string> names;
    names.reserve(children_[children].size());
    for (uint32_t child : children_[children]) names.emplace_back(entries_[child].name());
    return names;
  }

  void load(const std::string& origin, int fd, const SysrootLimits& limits, ArchiveReader reader);
  ArchiveReader reader() const override { return reader_; }

 private:
  static constexpr uint32_t kNoChildren = UINT32_MAX;
  static constexpr uint32_t kRootChildren = 0;
  struct Entry {
    std::string_view path;   // in arena_
    size_t hash = 0;
    Kind kind = Kind::kMissing;
    uint32_t children = kNoChildren;  // index into children_ once a name was recorded below it
    std::string_view bytes;  // a regular file's data (hard links share it), a symlink's target
    uint32_t leaf_at = 0;    // where its own name starts in path
    std::string_view name() const { return path.substr(leaf_at); }
  };
  // What load() counts against the limits, whichever reader gives the entries.
  struct LoadState {
    const std::string& origin;
    const SysrootLimits& limits;
    size_t entries = 0, total = 0, name_bytes = 0;
    std::string last_entry;  // the latest header's name, for the decompression limit's message
  };

  static size_t hash_of(std::string_view path) { return std::hash<std::string_view>{}(path); }

  // Open addressing over entries_ (slot = index + 1, 0 = empty), at most half full: a lookup
  // compares a stored hash and then one name, with no node to chase.
  const Entry* find(std::string_view path) const {
    if (slots_.empty()) return nullptr;
    const size_t hash = hash_of(path);
    for (size_t i = hash & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i] == 0) return nullptr;
      const Entry& e = entries_[slots_[i] - 1];
      if (e.hash == hash && e.path == path) return &e;
    }
  }
  Entry* find(std::string_view path) { return const_cast<Entry*>(std::as_const(*this).find(path)); }
  void grow_slots();
  // The entry `path` (already checked) set to kind and bytes, made when missing (`inserted`);
  // its index in entries_.
  uint32_t insert(std::string_view path, Kind kind, std::string_view bytes, bool& inserted);
  void add(std::string_view path, Kind kind, std::string_view bytes);
  void clear();
  void sort_children();

  // Our checks of one entry (names, types, links, limits), then its data through read_data
  // (a call per piece: false when the archive ends early or is corrupt, which `fail` reports).
  template <typename ReadData, typename Fail>
  void add_entry(LoadState& st, const TarEntry& te, ReadData&& read_data, Fail&& fail);
  void load_with_libarchive(LoadState& st, int fd);
  bool load_by_tar_walk(LoadState& st, int fd);

  ArchiveReader reader_ = ArchiveReader::kTarWalk;
  Arena arena_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;
  std::vector<std::vector<uint32_t>> children_{1};  // [kRootChildren]: the top's
  std::string_view last_parent_;                     // add(): the directory of the last entry
  uint32_t last_children_ = kNoChildren;             // and its children_ list
};

const char* entry_type_name(unsigned type) {
  switch (type) {
    case AE_IFCHR: return "a character device";
    case AE_IFBLK: return "a block device";
    case AE_IFIFO: return "a FIFO";
    case AE_IFSOCK: return "a socket";
    default: return "of an unsupported type";
  }
}

// The archive's own name for an entry, checked and normalised ("./a/b/" -> "a/b"); "" is the top.
std::string entry_path(const std::string& origin, std::string_view name, const SysrootLimits& limits) {
  if (name.size() > limits.max_path_bytes)
    throw InputError(fmt::format("{}: an entry name is longer than {} bytes", origin, limits.max_path_bytes));
  if (!name.empty() && name.front() == '/')
    throw InputError(fmt::format("{}: refusing archive entry '{}': absolute path", origin, escape_text(name)));
  if (is_plain_path(name)) return std::string(name);  // what the walk below gives back for it
  std::string out;
  for (const auto& part : split_path(std::string(name))) {
    if (part == "..")
      throw InputError(fmt::format("{}: refusing archive entry '{}': '..' in the path", origin, escape_text(name)));
    out = join(out, part);
  }
  return out;
}

void ArchiveBackend::grow_slots() {
  std::vector<uint32_t> slots(slots_.empty() ? 1024 : slots_.size() * 2, 0);
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    size_t at = entries_[i].hash & (slots.size() - 1);
    while (slots[at] != 0) at = (at + 1) & (slots.size() - 1);
    slots[at] = i + 1;
  }
  slots_ = std::move(slots);
}

uint32_t ArchiveBackend::insert(std::string_view path, Kind kind, std::string_view bytes, bool& inserted) {
  if ((entries_.size() + 1) * 2 > slots_.size()) grow_slots();
  const size_t hash = hash_of(path);
  size_t at = hash & (slots_.size() - 1);
  for (; slots_[at] != 0; at = (at + 1) & (slots_.size() - 1)) {
    Entry& e = entries_[slots_[at] - 1];
    if (e.hash == hash && e.path == path) {  // a later entry of the same name replaces it
      e.kind = kind;
      e.bytes = bytes;
      inserted = false;
      return slots_[at] - 1;
    }
  }
  const auto slash = path.rfind('/');
  const uint32_t leaf_at = slash == std::string_view::npos ? 0 : static_cast<uint32_t>(slash + 1);
  entries_.push_back(Entry{arena_.copy(path), hash, kind, kNoChildren, bytes, leaf_at});
  slots_[at] = static_cast<uint32_t>(entries_.size());
  inserted = true;
  return static_cast<uint32_t>(entries_.size() - 1);
}

void ArchiveBackend::add(std::string_view path, Kind kind, std::string_view bytes) {
  bool inserted = false;
  uint32_t index = insert(path, kind, bytes, inserted);
  if (!inserted) return;
  // Record the name under its parent, creating the parent directories a tar may leave implicit.
  // A tar lists a directory's entries one after another: the last parent seen is kept at hand
  // (it exists by then, as an entry or made here), which saves two lookups of long names.
  if (auto slash = path.rfind('/'); slash != std::string_view::npos && last_children_ != kNoChildren &&
                                    path.substr(0, slash) == last_parent_) {
    children_[last_children_].push_back(index);
    return;
  }
  for (bool first = true;; first = false) {
    std::string_view child = entries_[index].path;
    auto slash = child.rfind('/');
    if (slash == std::string_view::npos) {
      children_[kRootChildren].push_back(index);
      break;
    }
    std::string_view parent = child.substr(0, slash);
    Entry* existing = find(parent);
    uint32_t parent_index = 0;
    bool made = false;
    if (existing) {
      parent_index = static_cast<uint32_t>(existing - entries_.data());
    } else {
      parent_index = insert(parent, Kind::kDirectory, {}, made);
    }
    Entry& p = entries_[parent_index];
    if (p.children == kNoChildren) {
      p.children = static_cast<uint32_t>(children_.size());
      children_.emplace_back();
    }
    children_[p.children].push_back(index);
    if (first) {
      last_parent_ = p.path;
      last_children_ = p.children;
    }
    if (!made) break;
    index = parent_index;
  }
}

void ArchiveBackend::clear() {
  arena_ = Arena();
  entries_.clear();
  slots_.clear();
  children_.assign(1, {});
  last_parent_ = {};
  last_children_ = kNoChildren;
}

template <typename ReadData, typename Fail>
void ArchiveBackend::add_entry(LoadState& st, const TarEntry& te, ReadData&& read_data, Fail&& fail) {
  const std::string& origin = st.origin;
  const SysrootLimits& limits = st.limits;
  if (++st.entries > limits.max_archive_entries)
    throw InputError(fmt::format("{}: more than {} entries (the limit)", origin, limits.max_archive_entries));
  st.last_entry = te.name;
  std::string path = entry_path(origin, te.name, limits);
  // Names cost memory as file data does: each is at most max_path_bytes, all together bounded too.
  auto count_name = [&](size_t bytes) {
    if ((st.name_bytes += bytes) > limits.max_archive_name_bytes)
      throw InputError(fmt::format("{}: more than {} bytes of entry names and link targets (the limit)", origin,
                                   limits.max_archive_name_bytes));
  };
  count_name(path.size());
  if (te.hardlink) {
    // Only a second name for a regular file that came earlier in the same archive.
    std::string target = te.hardlink;
    try {
      target = entry_path(origin, target, limits);
    } catch (const InputError&) {
      throw InputError(fmt::format("{}: refusing hard link '{}' to '{}': outside the archive", origin,
                                   escape_text(path), escape_text(target)));
    }
    count_name(target.size());
    const Entry* it = find(target);
    if (!it || it->kind != Kind::kFile)
      throw InputError(fmt::format("{}: refusing hard link '{}': '{}' is not a regular file earlier in the archive",
                                   origin, escape_text(path), escape_text(target)));
    if (!path.empty()) add(path, Kind::kFile, it->bytes);
    return;
  }
  const unsigned type = te.type;
  if (path.empty() && type != AE_IFDIR) throw InputError(fmt::format("{}: refusing an entry named '.'", origin));
  if (type == AE_IFDIR) {
    if (!path.empty() && kind(path) != Kind::kDirectory) add(path, Kind::kDirectory, {});
  } else if (type == AE_IFLNK) {
    std::string_view t = te.symlink ? te.symlink : "";
    if (t.empty() || t.size() > limits.max_path_bytes)
      throw InputError(fmt::format("{}: refusing symlink '{}': empty or overlong target", origin, escape_text(path)));
    count_name(t.size());
    add(path, Kind::kSymlink, arena_.copy(t));
  } else if (type == AE_IFREG) {
    // read_data(piece) hands the file's bytes over in pieces; each is counted against the limits
    // as it comes, so a file or an archive past them stops at the piece that crosses.
    std::string data;
    auto take = [&](std::string_view piece) {
      data.append(piece);
      st.total += piece.size();
      if (data.size() > limits.max_file_bytes) too_large(origin, path, limits.max_file_bytes);
      if (st.total > limits.max_archive_bytes)
        throw InputError(fmt::format("{}: more than {} bytes of file data (the limit)", origin, limits.max_archive_bytes));
    };
    if (!read_data(take)) fail(fmt::format("corrupt or truncated archive in '{}'", escape_text(path)));
    add(path, Kind::kFile, arena_.copy(data));
  } else {
    throw InputError(fmt::format("{}: refusing archive entry '{}': {}; only directories, regular files and "
                                 "symlinks are accepted", origin, escape_text(path), entry_type_name(type)));
  }
}

// A libarchive reader of one format, freed with it. gzip is the only filter: "all filters" would
// run external programs (lrzip, lzop...) on a stranger's file. Without gzip: a reader of a stream
// already decompressed, which must not decompress more on its own.
class GzipArchiveReader {
 public:
  GzipArchiveReader(const ArchiveLibrary& la, int (*support_format)(struct archive*), bool gzip = true)
      : la_(la), a_(la.archive_read_new()) {
    if (gzip) la_.archive_read_support_filter_gzip(a_);
    support_format(a_);
  }
  ~GzipArchiveReader() { la_.archive_read_free(a_); }
  GzipArchiveReader(const GzipArchiveReader&) = delete;
  GzipArchiveReader& operator=(const GzipArchiveReader&) = delete;
  struct archive* get() const { return a_; }

 private:
  const ArchiveLibrary& la_;
  struct archive* a_;
};

// The decompressed bytes of an archive as libarchive's raw reader hands them out, taken in
// 512-byte tar blocks by the tar walk, or in the pieces gzip gives by libarchive's tar reader.
// Every byte the decompressor gives passes here and counts against max_archive_stream_bytes:
// headers, GNU long names, pax records, padding and the data of every entry, taken or skipped.
// Past the limit the walk's take() and pass() throw; next() (called by libarchive, C code that
// an exception must not cross) fails and the caller throws with past_limit().
class TarBlocks {
 public:
  TarBlocks(const ArchiveLibrary& la, struct archive* a, const std::string& origin, size_t limit,
            const std::string& last_entry)
      : la_(la), a_(a), origin_(origin), limit_(limit), last_entry_(last_entry) {}
  enum class Got { kBlock, kEnd, kBad };
  // The next n bytes (a multiple of 512 at most kCarry), contiguous: kEnd when the stream ends
  // exactly here, kBad when it ends inside them or cannot be read.
  Got take(size_t n, const char*& out) {
    if (avail_ >= n) {
      out = cur_;
      cur_ += n;
      avail_ -= n;
      return Got::kBlock;
    }
    size_t have = 0;
    while (have < n) {
      if (avail_ == 0 && !refill()) {
        if (over_limit_) past_limit();
        return have == 0 && !failed_ ? Got::kEnd : Got::kBad;
      }
      const size_t step = std::min(avail_, n - have);
      std::memcpy(carry_ + have, cur_, step);
      cur_ += step;
      avail_ -= step;
      have += step;
    }
    out = carry_;
    return Got::kBlock;
  }
  // The next n bytes given to `sink` in pieces; false when the stream ends first.
  template <typename Sink>
  bool pass(size_t n, Sink&& sink) {
    while (n > 0) {
      if (avail_ == 0 && !refill()) {
        if (over_limit_) past_limit();
        return false;
      }
      const size_t step = std::min(avail_, n);
      sink(std::string_view(cur_, step));
      cur_ += step;
      avail_ -= step;
      n -= step;
    }
    return true;
  }
  // For libarchive's read callback: the rest of the current piece, 0 at the end of the stream,
  // -1 when it is broken or past the limit (over_limit() tells which).
  la_ssize_t next(const void** out) {
    if (avail_ == 0 && !refill()) return failed_ ? -1 : 0;
    *out = cur_;
    const size_t n = avail_;
    cur_ += n;
    avail_ = 0;
    return static_cast<la_ssize_t>(n);
  }
  bool over_limit() const { return over_limit_; }
  bool failed() const { return failed_; }
  [[noreturn]] void past_limit() const {
    throw InputError(fmt::format("{}: more than {} bytes decompressed (the limit on headers, long names, pax records, "
                                 "padding and file data together), {}",
                                 origin_, limit_,
                                 last_entry_.empty() ? std::string("before its first entry")
                                                     : fmt::format("at or after entry '{}'", escape_text(last_entry_))));
  }
  static constexpr size_t kCarry = 512;

 private:
  bool refill() {
    for (;;) {
      const void* block = nullptr;
      size_t size = 0;
      la_int64_t offset = 0;
      int r = la_.archive_read_data_block(a_, &block, &size, &offset);
      if (r == ARCHIVE_EOF) return false;
      if (r != ARCHIVE_OK || offset != position_) {
        failed_ = true;
        return false;
      }
      position_ += static_cast<la_int64_t>(size);
      if (static_cast<uint64_t>(position_) > limit_) {
        over_limit_ = failed_ = true;
        return false;
      }
      if (size == 0) continue;
      cur_ = static_cast<const char*>(block);
      avail_ = size;
      return true;
    }
  }
  const ArchiveLibrary& la_;
  struct archive* a_;
  const std::string& origin_;
  const size_t limit_;
  const std::string& last_entry_;
  const char* cur_ = nullptr;
  size_t avail_ = 0;
  la_int64_t position_ = 0;
  bool failed_ = false;
  bool over_limit_ = false;
  char carry_[kCarry];
};

// libarchive's tar reader, fed by a raw reader (gzip only) through TarBlocks, so that every
// decompressed byte it reads, in a header it takes or in data it skips, is counted there.
void ArchiveBackend::load_with_libarchive(LoadState& st, int fd) {
  const ArchiveLibrary& la = archive_library("read", st.origin);
  GzipArchiveReader gunzip(la, la.archive_read_support_format_raw);
  struct archive* raw = gunzip.get();
  auto fail_raw = [&](const std::string& what) {
    const char* why = la.archive_error_string(raw);
    throw InputError(fmt::format("{}: {}{}{}", st.origin, what, why ? ": " : "", why ? why : ""));
  };
  if (la.archive_read_open_fd(raw, fd, 1 << 16) != ARCHIVE_OK) fail_raw("cannot open archive");
  struct archive_entry* whole = nullptr;
  if (la.archive_read_next_header(raw, &whole) != ARCHIVE_OK) fail_raw("cannot open archive");
  TarBlocks blocks(la, raw, st.origin, st.limits.max_archive_stream_bytes, st.last_entry);
  GzipArchiveReader reader(la, la.archive_read_support_format_tar, false);  // the stream is already gunzipped
  struct archive* a = reader.get();
  // A failure of the stream (gzip's error, or the limit) is told as such, else libarchive's.
  auto fail = [&](const std::string& what) {
    if (blocks.over_limit()) blocks.past_limit();
    if (blocks.failed()) fail_raw(what);
    const char* why = la.archive_error_string(a);
    throw InputError(fmt::format("{}: {}{}{}", st.origin, what, why ? ": " : "", why ? why : ""));
  };
  auto read = [](struct archive*, void* stream, const void** out) { return static_cast<TarBlocks*>(stream)->next(out); };
  if (la.archive_read_open(a, &blocks, nullptr, read, nullptr) != ARCHIVE_OK) fail("cannot open archive");
  std::vector<char> buf(1 << 16);
  for (;;) {
    struct archive_entry* e = nullptr;
    int r = la.archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) fail(fmt::format("corrupt or truncated archive after {} entries", st.entries));
    TarEntry te;
    const char* name = la.archive_entry_pathname(e);
    te.name = name ? name : "";
    te.hardlink = la.archive_entry_hardlink(e);
    te.type = la.archive_entry_filetype(e);
    if (!te.hardlink && te.type == AE_IFLNK) te.symlink = la.archive_entry_symlink(e);
    add_entry(st, te, [&](auto&& take) {
      for (;;) {
        la_ssize_t n = la.archive_read_data(a, buf.data(), buf.size());
        if (n < 0) return false;
        if (n == 0) return true;
        take(std::string_view(buf.data(), static_cast<size_t>(n)));
      }
    }, fail);
  }
}

// An octal field as tar_atol8() reads it, but only in its plain form: leading blanks, digits
// 0-7, then nothing but NULs and blanks. nullopt for anything else (base-256, tabs, stray text).
std::optional<uint64_t> plain_octal(const char* field, size_t width) {
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  uint64_t value = 0;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) value = value * 8 + static_cast<uint64_t>(field[i] - '0');
  for (; i < width; ++i)
    if (field[i] != '\0' && field[i] != ' ') return std::nullopt;
  return value;
}

// A NUL-terminated field of at most `width` bytes, as archive_strncpy() copies it.
std::string_view tar_field(const char* field, size_t width) {
  return {field, static_cast<size_t>(std::find(field, field + width, '\0') - field)};
}

// Bytes libarchive takes as they are in the C locale: no conversion can turn them into others.
bool is_plain_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80 && c != '\0'; });
}

// The snapshot's own formats, read straight from the decompressed stream: POSIX ustar (with its
// prefix field), GNU tar with 'L'/'K' long names, and pax 'x' headers that give only a path or a
// link. It gives the same entries as libarchive's tar reader, which the walk stands in for: it
// accepts only what that reader reads the same way in every version, and anything else (another
// type, a base-256 number, a signed checksum, GNU sparse fields, a name that is not plain ASCII,
// a size past a limit, a stream that ends or breaks) makes it give up, so that the caller reads
// the archive again with libarchive, which decides and words the error as before. Names pass
// libarchive's wide-character conversion for every regular file; the walk skips that.
bool ArchiveBackend::load_by_tar_walk(LoadState& st, int fd) {
  const ArchiveLibrary& la = archive_library("read", st.origin);
  GzipArchiveReader reader(la, la.archive_read_support_format_raw);
  struct archive* a = reader.get();
  struct archive_entry* raw = nullptr;
  if (la.archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK || la.archive_read_next_header(a, &raw) != ARCHIVE_OK)
    return false;
  TarBlocks blocks(la, a, st.origin, st.limits.max_archive_stream_bytes, st.last_entry);
  constexpr size_t kMaxSpecialBody = 1 << 20;  // libarchive's own bound on 'L', 'K' and 'x' bodies
  std::string long_name, long_link, pax_path, pax_link;
  bool have_long_name = false, have_long_link = false, have_pax = false;
  std::string header_name, header_link;
  bool gave_up = false;
  auto give_up = [&](const std::string&) { gave_up = true; };
  for (;;) {
    const char* h = nullptr;
    TarBlocks::Got got = blocks.take(512, h);
    if (got == TarBlocks::Got::kBad) return false;
    if (got == TarBlocks::Got::kEnd) {
      if (have_long_name || have_long_link || have_pax) return false;  // libarchive: damaged
      break;
    }
    if (std::all_of(h, h + 512, [](char c) { return c == '\0'; })) {
      if (have_long_name || have_long_link || have_pax) return false;
      break;  // libarchive stops at the first block of zeros, whatever follows
    }
    auto sum = plain_octal(h + 148, 8);
    unsigned check = 8 * ' ';  // the checksum field counts as blanks
    for (size_t i = 0; i < 512; ++i) check += static_cast<unsigned char>(h[i]);
    for (size_t i = 148; i < 156; ++i) check -= static_cast<unsigned char>(h[i]);
    if (!sum || *sum != check) return false;
    const char mode0 = h[100];
    if (mode0 != ' ' && (mode0 < '0' || mode0 > '7')) return false;
    auto size = plain_octal(h + 124, 12);
    if (!size) return false;
    const char type = h[156];
    const bool gnu = std::memcmp(h + 257, "ustar  \0", 8) == 0;
    const bool ustar = std::memcmp(h + 257, "ustar\0" "00", 8) == 0;
    if (!gnu && !ustar) return false;
    if (type == 'L' || type == 'K' || type == 'x') {
      if (*size == 0 || *size > kMaxSpecialBody) return false;
      std::string body;
      body.reserve(*size);
      if (!blocks.pass(*size, [&](std::string_view piece) { body.append(piece); })) return false;
      if (!blocks.pass((512 - *size % 512) % 512, [](std::string_view) {})) return false;
      if (type == 'x') {
        if (have_pax || have_long_name || have_long_link) return false;
        if (body.find('\0') != std::string::npos) return false;  // libarchive reads it up to a NUL
        have_pax = true;
        pax_path.clear();
        pax_link.clear();
        // Records "LEN key=value\n", as pax_header() parses them; only keys that set the name,
        // the link or what we do not read are taken.
        std::string_view rest = body;
        while (!rest.empty()) {
          size_t digits = 0, length = 0;
          while (digits < rest.size() && digits < 7 && rest[digits] >= '0' && rest[digits] <= '9')
            length = length * 10 + static_cast<size_t>(rest[digits++] - '0');
          if (digits == 0 || digits == 7 || digits >= rest.size() || rest[digits] != ' ') return false;
          if (length > rest.size() || length <= digits + 1 || rest[length - 1] != '\n') return false;
          std::string_view record = rest.substr(digits + 1, length - digits - 2);
          rest.remove_prefix(length);
          auto eq = record.find('=');
          if (eq == std::string_view::npos || eq == 0) return false;
          std::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
          if (!is_plain_ascii(value) || value.empty()) return false;
          if (key == "path" || key == "linkpath") {
            std::string& slot = key == "path" ? pax_path : pax_link;
            if (!slot.empty()) return false;
            slot = value;
          } else if (key != "mtime" && key != "atime" && key != "ctime" && key != "uid" && key != "gid" &&
                     key != "uname" && key != "gname") {
            return false;
          }
        }
      } else {
        // GNU tar: the name (or link) for the next header, up to its first NUL.
        std::string& slot = type == 'L' ? long_name : long_link;
        bool& have = type == 'L' ? have_long_name : have_long_link;
        if (have || have_pax) return false;
        auto nul = body.find('\0');
        if (nul != std::string::npos &&
            !std::all_of(body.begin() + static_cast<std::ptrdiff_t>(nul), body.end(), [](char c) { return c == '\0'; }))
          return false;
        slot = body.substr(0, nul);
        if (slot.empty() || !is_plain_ascii(slot)) return false;
        have = true;
      }
      continue;
    }
    // A real header. GNU's sparse and real-size fields would make libarchive read more: none here.
    if (gnu && (h[386] != '\0' || h[482] != '\0' || h[483] != '\0')) return false;
    header_name.clear();
    if (ustar && h[345] != '\0') {
      header_name = tar_field(h + 345, 155);
      if (header_name.back() != '/') header_name += '/';
    }
    header_name += tar_field(h, 100);
    header_link = tar_field(h + 157, 100);
    std::string_view name = have_long_name ? std::string_view(long_name) : !pax_path.empty() ? std::string_view(pax_path)
                                                                                              : std::string_view(header_name);
    std::string_view link_override = have_long_link ? std::string_view(long_link) : std::string_view(pax_link);
    if (name.empty() || !is_plain_ascii(name) || !is_plain_ascii(header_link)) return false;
    TarEntry te;
    te.name = name;
    std::string link;
    if (type == '1' || type == '2') {
      // libarchive sets a link from the header's field, then replaces it by the long or pax one.
      if (*size != 0 || header_link.empty()) return false;
      link = link_override.empty() ? header_link : std::string(link_override);
      if (type == '1') te.hardlink = link.c_str();
      else te.symlink = link.c_str();
      te.type = type == '1' ? 0 : AE_IFLNK;
    } else if (type == '0' || type == '5') {
      if (!link_override.empty()) return false;  // a link on a file or directory: a hard link to libarchive
      if (type == '5' && *size != 0) return false;
      if (type == '0' && name.back() == '/') return false;  // libarchive makes it a directory
      te.type = type == '0' ? AE_IFREG : AE_IFDIR;
    } else {
      return false;
    }
    const uint64_t data_bytes = type == '0' ? *size : 0;
    // Past a limit: libarchive's reading reports it, piece by piece as before.
    if (data_bytes > st.limits.max_file_bytes || st.total + data_bytes > st.limits.max_archive_bytes) return false;
    add_entry(st, te, [&](auto&& take) { return blocks.pass(data_bytes, take); }, give_up);
    if (gave_up) return false;
    if (!blocks.pass((512 - data_bytes % 512) % 512, [](std::string_view) {})) return false;
    have_long_name = have_long_link = have_pax = false;
    long_name.clear();
    long_link.clear();
    pax_path.clear();
    pax_link.clear();
  }
  return st.entries > 0;
}

void ArchiveBackend::load(const std::string& origin, int fd, const SysrootLimits& limits, ArchiveReader reader) {
  if (reader == ArchiveReader::kTarWalk) {
    LoadState st{origin, limits, 0, 0, 0, {}};
    if (load_by_tar_walk(st, fd)) {
      sort_children();
      return;
    }
  }
  // The walk gave up: libarchive reads the archive from its start and decides.
  reader_ = ArchiveReader::kLibarchive;
  clear();
  if (::lseek(fd, 0, SEEK_SET) != 0) throw InputError(fmt::format("{}: cannot seek: {}", origin, std::strerror(errno)));
  LoadState st{origin, limits, 0, 0, 0, {}};
  load_with_libarchive(st, fd);
  if (st.entries == 0) throw InputError(fmt::format("{}: archive is empty", origin));
  sort_children();
}

void ArchiveBackend::sort_children() {
  for (auto& list : children_)
    std::sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) { return entries_[a].name() < entries_[b].name(); });
}

}  // namespace

namespace {

bool has_tree(const Sysroot::Backend& b, const std::string& top) {
  return b.kind(join(top, "sys")) == Kind::kDirectory || b.kind(join(top, "proc")) == Kind::kDirectory;
}

// A prefix view: the capture's tree may sit inside one directory (e.g. "sysroot/").
class SubtreeBackend : public Sysroot::Backend {
 public:
  SubtreeBackend(std::unique_ptr<Sysroot::Backend> inner, std::string top) : inner_(std::move(inner)), top_(std::move(top)) {}
  bool live() const override { return inner_->live(); }
  bool archive() const override { return inner_->archive(); }
  ArchiveReader reader() const override { return inner_->reader(); }
  Kind kind(const std::string& p) const override { return inner_->kind(join(top_, p)); }
  std::optional<std::string> link_target(const std::string& p) const override { return inner_->link_target(join(top_, p)); }
  std::optional<std::string> read(const std::string& p, size_t max) const override { return inner_->read(join(top_, p), max); }
  std::optional<std::string> read_unless_link(const std::string& p, size_t max, bool& link) const override {
    return inner_->read_unless_link(join(top_, p), max, link);
  }
  Kind kind_in(const std::string& dir, std::string_view name) const override { return inner_->kind_in(inner_directory(dir), name); }
  std::optional<std::string> link_target_in(const std::string& dir, std::string_view name) const override {
    return inner_->link_target_in(inner_directory(dir), name);
  }
  std::optional<std::string> read_in(const std::string& dir, std::string_view name, size_t max, bool& link) const override {
    return inner_->read_in(inner_directory(dir), name, max, link);
  }
  std::optional<std::string> read_below(const std::string& dir, std::string_view sub, std::string_view name, size_t max,
                                        bool& handled) const override {
    return inner_->read_below(inner_directory(dir), sub, name, max, handled);
  }
  std::optional<uint64_t> size(const std::string& p) const override { return inner_->size(join(top_, p)); }
  std::vector<std::string> list(const std::string& p, size_t max) const override { return inner_->list(join(top_, p), max); }
  std::optional<fs::path> host_path(const std::string& p) const override { return inner_->host_path(join(top_, p)); }

 private:
  std::string inner_directory(const std::string& dir) const { return dir.empty() ? top_ : join(top_, dir); }
  std::unique_ptr<Sysroot::Backend> inner_;
  std::string top_;
};

std::unique_ptr<Sysroot::Backend> find_tree_root(const std::string& origin, std::unique_ptr<Sysroot::Backend> b,
                                                 const SysrootLimits& limits) {
  if (b->live() || has_tree(*b, "")) return b;
  std::vector<std::string> subdirs;
  for (const auto& name : b->list("", limits.max_directory_entries))
    if (b->kind(name) == Kind::kDirectory) subdirs.push_back(name);
  if (subdirs.size() == 1 && has_tree(*b, subdirs[0])) return std::make_unique<SubtreeBackend>(std::move(b), subdirs[0]);
  throw InputError(fmt::format("{}: not a sysroot: no sys/ or proc/ at its top", origin));
}

}  // namespace

Sysroot Sysroot::open(const std::string& path, const SysrootLimits& limits, ArchiveReader reader) {
  Sysroot s;
  s.origin_ = path;
  s.limits_ = limits;
  // O_NONBLOCK: a FIFO named as the sysroot must not hang the open.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) throw InputError(fmt::format("{}: no such file or directory", path));
    throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) throw InputError(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    fs::path canonical = fs::canonical(path, ec);
    if (ec) throw InputError(fmt::format("{}: {}", path, ec.message()));
    bool live = canonical == "/";
    s.backend_ = find_tree_root(path, std::make_unique<DirectoryBackend>(std::move(fd), canonical, live), limits);
    return s;
  }
  if (!S_ISREG(st.st_mode)) throw InputError(fmt::format("{}: neither a directory nor a snapshot file", path));
  if (!path.ends_with(".tar.gz") && !path.ends_with(".tgz") && !path.ends_with(".tar"))
    throw InputError(fmt::format("{}: a snapshot must be a directory or a .tar.gz file", path));
  auto archive = std::make_unique<ArchiveBackend>();
  archive->load(path, fd.get(), limits, reader);
  s.backend_ = find_tree_root(path, std::move(archive), limits);
  return s;
}

Sysroot::~Sysroot() = default;
Sysroot::Sysroot(Sysroot&&) noexcept = default;
Sysroot& Sysroot::operator=(Sysroot&&) noexcept = default;

bool Sysroot::is_live() const { return backend_->live(); }
bool Sysroot::is_archive() const { return backend_->archive(); }
ArchiveReader Sysroot::archive_reader() const { return backend_->reader(); }

namespace {

constexpr size_t kMaxKnownDirectories = 1 << 20;

// The components of a path, taken from the front one at a time, and the components of link
// targets put before those that remain: no component is copied into a string of its own.
class Components {
 public:
  explicit Components(std::string_view path) { texts_.push_back(path); }
  // Its components come next, then those that remained.
  void put_first(std::string_view text) { texts_.push_back(text); }
  // Empty and "." components are skipped, as split_path() drops them.
  bool next(std::string_view& part) {
    if (done()) return false;
    std::string_view& text = texts_.back();
    const size_t slash = text.find('/');
    part = text.substr(0, slash);
    text.remove_prefix(slash == std::string_view::npos ? text.size() : slash + 1);
    return true;
  }
  // What is left of the text being walked (after done() returned false).
  std::string_view current() const { return texts_.back(); }
  void skip(size_t bytes) { texts_.back().remove_prefix(bytes); }
  bool done() {
    while (!texts_.empty()) {
      std::string_view& text = texts_.back();
      while (!text.empty() && (text[0] == '/' || (text[0] == '.' && (text.size() == 1 || text[1] == '/'))))
        text.remove_prefix(text[0] == '/' ? 1 : std::min<size_t>(2, text.size()));
      if (!text.empty()) return false;
      texts_.pop_back();
    }
    return true;
  }

 private:
  std::vector<std::string_view> texts_;  // the current text last
};

// Resolves every component of `path` inside the backend as the kernel would below a chroot,
// except that ".." above the top is refused rather than clamped. With follow_last false the
// last component is not followed (lstat semantics). nullopt when missing, looping or escaping.
// `base` is a directory already resolved, where the walk starts. `directories` remembers the
// resolved paths found to be real directories, so that no walk stats them again.
template <typename DirectorySet>
std::optional<std::string> resolve_parts(const Sysroot::Backend& b, std::string_view path, bool follow_last,
                                         const SysrootLimits& limits, DirectorySet& directories, std::string base = {}) {
  Components todo(path);
  std::forward_list<std::string> targets;  // the links' targets, which todo's views point into
  std::string so_far = std::move(base);   // empty: the top (no component left to pop)
  auto pop = [&] {
    auto slash = so_far.rfind('/');
    so_far.resize(slash == std::string::npos ? 0 : slash);
  };
  int links = 0;
  size_t steps = 0;
  // Where a text (the path, a link's target) leads into a directory already known, its components
  // up to its last are taken in one step: a known directory is a resolved path (no link in it),
  // so the walk would find each of them a directory. Tried once a text and after each "..", so
  // that a miss costs one lookup, not one a component.
  bool try_known_prefix = true;
  std::string_view part;
  while (!todo.done()) {
    if (try_known_prefix) {
      try_known_prefix = false;
      const std::string_view text = todo.current();
      const size_t cut = text.rfind('/');
      if (cut != std::string_view::npos && is_plain_path(text.substr(0, cut))) {
        const size_t before = so_far.size();
        if (!so_far.empty()) so_far += '/';
        so_far += text.substr(0, cut);
        const size_t taken = static_cast<size_t>(std::count(text.begin(), text.begin() + cut, '/')) + 1;
        if (so_far.size() <= limits.max_path_bytes && directories.count(so_far)) {
          steps += taken;
          if (steps > limits.max_path_bytes) return std::nullopt;
          todo.skip(cut + 1);
          continue;
        }
        so_far.resize(before);
      }
    }
    todo.next(part);
    if (++steps > limits.max_path_bytes) return std::nullopt;  // a bound even for odd link chains
    if (part == "..") {
      if (so_far.empty()) return std::nullopt;  // would leave the sysroot
      pop();
      try_known_prefix = true;
      continue;
    }
    const bool last = todo.done();
    if (!so_far.empty()) so_far += '/';
    so_far += part;
    if (so_far.size() > limits.max_path_bytes) return std::nullopt;
    Kind k = directories.count(so_far) ? Kind::kDirectory : b.kind(so_far);
    if (k == Kind::kMissing) return std::nullopt;
    if (k == Kind::kDirectory && directories.size() < kMaxKnownDirectories) directories.insert(so_far);
    if (k == Kind::kSymlink && (!last || follow_last)) {
      if (++links > limits.max_symlinks) return std::nullopt;
      auto target = b.link_target(so_far);
      if (!target) return std::nullopt;
      pop();
      if (!target->empty() && target->front() == '/') so_far.clear();
      targets.push_front(std::move(*target));
      todo.put_first(targets.front());
      try_known_prefix = true;
      continue;
    }
    if (!last && k != Kind::kDirectory) return std::nullopt;
  }
  return so_far;
}

}  // namespace

// A path's directory is resolved once: the reader asks for a dozen files in each function's
// directory, and resolving walks (and stats) every component of a deep sysfs path.
const std::optional<std::string>& Sysroot::resolve_directory(std::string_view dir) const {
  if (auto cached = resolved_dirs_.find(dir); cached != resolved_dirs_.end()) return cached->second;
  auto resolved = resolve_parts(*backend_, dir, true, limits_, directories_);
  if (resolved && !directories_.count(*resolved) && backend_->kind(*resolved) != Kind::kDirectory) resolved.reset();
  if (resolved_dirs_.size() >= kMaxResolvedDirs) {  // a bound, not an expected case
    resolved_dirs_.clear();
    last_dir_ = nullptr;
  }
  // What it resolved to holds no link and is a directory: it resolves to itself. The reader
  // goes on by that path (a function's sysfs_path) and so finds it at once.
  if (resolved && *resolved != dir) resolved_dirs_.emplace(*resolved, resolved);
  return resolved_dirs_.emplace(std::string(dir), std::move(resolved)).first->second;
}

const std::optional<std::string>* Sysroot::directory_of(std::string_view path, std::string_view& name) const {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return nullptr;
  name = path.substr(slash + 1);
  if (!is_plain_name(name)) return nullptr;
  const std::string_view dir = path.substr(0, slash);
  if (last_dir_ && dir == last_dir_text_) return last_dir_;  // checked plain when it was kept
  if (!is_plain_path(dir)) return nullptr;
  const std::optional<std::string>& resolved = resolve_directory(dir);
  last_dir_text_.assign(dir);
  return last_dir_ = &resolved;
}

std::optional<std::string> Sysroot::resolve_path(std::string_view relative, bool follow_last) const {
  std::string_view name;
  if (const auto* dir = directory_of(relative, name)) {
    // A directory already resolved (a function's, reached through its sys/bus/pci/devices link)
    // needs no second walk: followed to the end, it resolves to what resolve_directory() found.
    if (follow_last)
      if (auto known = resolved_dirs_.find(relative); known != resolved_dirs_.end() && known->second) return known->second;
    if (!*dir) return std::nullopt;
    std::string path = join(**dir, name);
    if (path.size() > limits_.max_path_bytes) return std::nullopt;
    Kind k = directories_.count(path) ? Kind::kDirectory : backend_->kind_in(**dir, name);
    if (k == Kind::kMissing) return std::nullopt;
    if (k != Kind::kSymlink || !follow_last) return path;
    return resolve_parts(*backend_, name, true, limits_, directories_, **dir);
  }
  auto parts = split_path(relative);
  if (follow_last && !parts.empty())
    if (auto known = resolved_dirs_.find(join_parts(parts)); known != resolved_dirs_.end() && known->second)
      return known->second;
  if (parts.size() < 2 || parts.back() == "..") return resolve_parts(*backend_, relative, follow_last, limits_, directories_);
  std::string last = std::move(parts.back());
  parts.pop_back();
  const auto& dir = resolve_directory(join_parts(parts));
  if (!dir) return std::nullopt;
  return resolve_parts(*backend_, last, follow_last, limits_, directories_, *dir);
}

// "DIR/SUB/NAME" read without resolving (and remembering) SUB: only DIR is resolved, and the
// backend checks SUB in DIR's listing. `handled` false: not of that form, or the backend left it.
std::optional<std::string> Sysroot::read_lone_file(std::string_view relative, size_t max, bool& handled) const {
  handled = false;
  const size_t slash = relative.rfind('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view name = relative.substr(slash + 1);
  std::string_view sub;
  if (!is_plain_name(name)) return std::nullopt;
  const auto* dir = directory_of(relative.substr(0, slash), sub);
  if (!dir) return std::nullopt;
  handled = !*dir;  // DIR is missing, so is the file
  if (handled) return std::nullopt;
  return backend_->read_below(**dir, sub, name, max, handled);
}

// A file in a resolved directory is opened at once, not looked at first; only a link is resolved.
std::optional<std::string> Sysroot::read_file(const std::string& relative, size_t max, bool lone) const {
  if (lone) {
    bool handled = false;
    auto data = read_lone_file(relative, max, handled);
    if (handled) return data;
  }
  // The reader's paths are plain ("dir/.../name"): their directory, once resolved, is found by
  // its text alone, without splitting and joining the path again.
  std::string_view name;
  if (const auto* dir = directory_of(relative, name)) {
    if (!*dir) return std::nullopt;
    bool link = false;
    auto data = backend_->read_in(**dir, name, max, link);
    if (!link) return data;
  } else if (auto parts = split_path(relative); parts.size() >= 2 && parts.back() != "..") {
    std::string last = std::move(parts.back());
    parts.pop_back();
    const auto& dir = resolve_directory(join_parts(parts));
    if (!dir) return std::nullopt;
    bool link = false;
    auto data = backend_->read_in(*dir, last, max, link);
    if (!link) return data;
  }
  auto path = resolve(relative);
  if (!path) return std::nullopt;
  return backend_->read(*path, max);
}

bool Sysroot::read_pieces(const std::string& relative, size_t max, const std::function<void(const PieceRead&)>& use) const {
  std::string_view name;
  if (const auto* dir = directory_of(relative, name)) {
    if (!*dir) return false;
    bool link = false;
    const bool read = backend_->read_pieces_in(**dir, name, max, use, link);
    if (!link) return read;
  }
  // A path the reader does not name plainly, or a link: read whole as read_bytes() reads it.
  auto data = read_file(relative, max);
  if (!data) return false;
  use(Backend::pieces_of(*data, max));
  return true;
}

std::optional<std::string> Sysroot::resolve(const std::string& relative) const { return resolve_path(relative, true); }

bool Sysroot::exists(const std::string& relative) const {
  std::string_view name;
  if (const auto* dir = directory_of(relative, name)) {
    if (!*dir || joined_size(**dir, name) > limits_.max_path_bytes) return false;
    return backend_->kind_in(**dir, name) != Kind::kMissing;  // a link is not followed
  }
  if (names_top(relative)) return true;
  return resolve_path(relative, false).has_value();
}

std::optional<std::string> Sysroot::read_text(const std::string& relative) const {
  auto data = read_file(relative, limits_.max_file_bytes);
  if (data && data->size() > limits_.max_file_bytes) too_large(origin_, relative, limits_.max_file_bytes);
  return data;
}

std::optional<std::string> Sysroot::read_line(const std::string& relative) const {
  auto text = read_text(relative);
  if (!text) return std::nullopt;
  auto nl = text->find('\n');
  if (nl != std::string::npos) text->resize(nl);
  return text;
}

std::optional<std::string> Sysroot::read_lone_line(const std::string& relative) const {
  auto text = read_file(relative, limits_.max_file_bytes, /*lone=*/true);
  if (text && text->size() > limits_.max_file_bytes) too_large(origin_, relative, limits_.max_file_bytes);
  if (!text) return std::nullopt;
  auto nl = text->find('\n');
  if (nl != std::string::npos) text->resize(nl);
  return text;
}

std::optional<std::vector<uint8_t>> Sysroot::read_bytes(const std::string& relative, size_t max) const {
  auto data = read_file(relative, max);
  if (!data) return std::nullopt;
  if (data->size() > max) data->resize(max);
  return std::vector<uint8_t>(data->begin(), data->end());
}

std::optional<uint64_t> Sysroot::file_size(const std::string& relative) const {
  auto path = resolve(relative);
  if (!path) return std::nullopt;
  return backend_->size(*path);
}

std::optional<std::string> Sysroot::read_link(const std::string& relative) const {
  std::string_view name;
  if (const auto* dir = directory_of(relative, name)) {
    if (!*dir || joined_size(**dir, name) > limits_.max_path_bytes) return std::nullopt;
    return backend_->link_target_in(**dir, name);
  }
  if (names_top(relative)) return std::nullopt;
  auto path = resolve_path(relative, false);
  if (!path || backend_->kind(*path) != Kind::kSymlink) return std::nullopt;
  return backend_->link_target(*path);
}

std::vector<std::string> Sysroot::list(const std::string& relative) const {
  auto path = resolve(relative);
  if (!path) return {};
  auto names = backend_->list(*path, limits_.max_directory_entries);
  if (!std::is_sorted(names.begin(), names.end())) std::sort(names.begin(), names.end());  // a listing comes sorted
  return names;
}

std::optional<fs::path> Sysroot::confined_directory(const std::string& relative) const {
  auto path = resolve(relative);
  if (!path || backend_->kind(*path) != Kind::kDirectory) return std::nullopt;
  return backend_->host_path(*path);
}

}  // namespace p2paudit
