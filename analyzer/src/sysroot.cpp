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
#include <cerrno>
#include <cstring>
#include <list>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "p2paudit/errors.h"
#include "p2paudit/input_file.h"

namespace fs = std::filesystem;

namespace p2paudit {

namespace {

enum class Kind { kMissing, kDirectory, kFile, kSymlink, kOther };

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::vector<std::string> split_path(const std::string& p) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    if (end > start) {
      std::string part = p.substr(start, end - start);
      if (part != ".") parts.push_back(std::move(part));
    }
    start = end + 1;
  }
  return parts;
}

// No empty, "." or ".." component: split_path() and a join give the same text back.
bool is_plain_path(std::string_view p) {
  if (p.empty()) return false;
  for (size_t start = 0;;) {
    size_t end = p.find('/', start);
    std::string_view part = p.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

std::string join(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }

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
  // read_unless_link() of the one file read in its directory: a backend may skip listing it.
  virtual std::optional<std::string> read_lone(const std::string& path, size_t max, bool& link) const {
    return read_unless_link(path, max, link);
  }
  virtual std::optional<uint64_t> size(const std::string& path) const = 0;
  virtual std::vector<std::string> list(const std::string& path, size_t max) const = 0;
  virtual std::optional<fs::path> host_path(const std::string&) const { return std::nullopt; }
};

namespace {

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

  std::optional<std::string> link_target(const std::string& path) const override {
    auto [dir, name] = open_parent(path);
    if (!dir) return std::nullopt;
    if (dir->listed && entry_kind(*dir, name) != Kind::kSymlink) return std::nullopt;
    char buf[4097];
    ssize_t n = ::readlinkat(dir->fd.get(), name.c_str(), buf, sizeof buf);
    if (n < 0 || static_cast<size_t>(n) >= sizeof buf) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }

  std::optional<std::string> read(const std::string& path, size_t max) const override {
    bool link = false;
    return read_unless_link(path, max, link);
  }

  std::optional<std::string> read_unless_link(const std::string& path, size_t max, bool& link) const override {
    auto [dir, name] = open_parent(path);
    if (!dir) return std::nullopt;
    Kind k = dir->listed ? entry_kind(*dir, name, /*stat_unknown=*/false) : Kind::kOther;
    if (k == Kind::kSymlink) link = true;
    if (k == Kind::kMissing || k == Kind::kSymlink || k == Kind::kDirectory) return std::nullopt;
    const bool known_regular = k == Kind::kFile;  // else (DT_UNKNOWN, not listed) fstat decides
    Fd fd(::openat(dir->fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ELOOP) link = true;
      return std::nullopt;
    }
    return read_open(fd, max, known_regular);
  }

  // The directory is not opened (nor listed) for one file: the file is opened from the nearest
  // open directory above it with openat2(RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH), which refuses
  // every link on the way and any step out, and fstat'ed. Anything unusual (a link, an old kernel
  // without openat2) takes the ordinary path.
  std::optional<std::string> read_lone(const std::string& path, size_t max, bool& link) const override {
    auto slash = path.rfind('/');
    if (slash == std::string::npos || slash == 0) return read_unless_link(path, max, link);
    std::string dir = path.substr(0, slash);
    if (dirs_.count(dir)) return read_unless_link(path, max, link);
    auto [parent, dir_name] = open_parent(dir);
    if (!parent || !parent->listed || entry_kind(*parent, dir_name, false) != Kind::kDirectory)
      return read_unless_link(path, max, link);
    struct open_how how{};
    how.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH;
    std::string below = dir_name + path.substr(slash);
    Fd fd(static_cast<int>(::syscall(SYS_openat2, parent->fd.get(), below.c_str(), &how, sizeof how)));
    if (fd.get() < 0) {
      if (errno == ENOENT) return std::nullopt;
      return read_unless_link(path, max, link);
    }
    return read_open(fd, max, false);
  }

  // The bytes of an open file, at most max + 1. known_regular: the listing said so, else fstat
  // decides (and gives a captured file's true size).
  std::optional<std::string> read_open(const Fd& fd, size_t max, bool known_regular) const {
    size_t expected = SIZE_MAX;  // sysfs and procfs report sizes that are not what they hold
    if (!known_regular) {
      struct stat st{};
      if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
      if (!live_) expected = static_cast<size_t>(st.st_size);  // a captured tree's sizes are true
    }
    // A small file is read into `first`: a string sized for the read would be cleared first, 8 KiB
    // for every 5-byte attribute. `data` takes the bytes once they outgrow it.
    char first[kFirstRead];
    std::string data;
    char* buf = first;
    size_t used = 0, capacity = std::min(max + 1, kFirstRead);
    while (used <= max && used != expected) {
      if (used == capacity) {
        if (buf == first) data.assign(first, used);
        capacity = std::min(max + 1, capacity * 2 + kFirstRead);
        data.resize(capacity);
        buf = data.data();
      }
      const size_t asked = capacity - used;
      ssize_t n = ::read(fd.get(), buf + used, asked);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return std::nullopt;  // EAGAIN: a FIFO with a writer, not a file
      if (n == 0) break;
      used += static_cast<size_t>(n);
      // A regular file of a captured tree (a plain file system) returns less than asked only at
      // its end: one read for a small file. sysfs and procfs are read to EOF (seq_file stops short).
      if (!live_ && static_cast<size_t>(n) < asked) break;
    }
    if (buf == first) return std::string(first, used);
    data.resize(used);
    return data;
  }

  std::optional<uint64_t> size(const std::string& path) const override {
    auto [dir, name] = open_parent(path);
    if (!dir) return std::nullopt;
    if (dir->listed && entry_kind(*dir, name, false) == Kind::kMissing) return std::nullopt;
    Fd fd(::openat(dir->fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
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
      for (const auto& e : dir->entries) names.push_back(e.name);
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
    std::string name;
    Kind kind;  // from d_type; kOther stands for DT_UNKNOWN until fstatat answers
    bool known;
  };
  struct Dir {
    Fd fd;
    bool listed = false;         // entries hold the whole directory
    std::vector<Entry> entries;  // sorted by name
    std::list<std::string>::iterator lru;
  };

  // Kind of `name` in an open directory: from its listing when it has one (DT_UNKNOWN is
  // fstatat'ed once, unless stat_unknown is false: the caller opens it and fstats then).
  Kind entry_kind(Dir& dir, const std::string& name, bool stat_unknown = true) const {
    if (dir.listed) {
      auto it = std::lower_bound(dir.entries.begin(), dir.entries.end(), name,
                                 [](const Entry& e, const std::string& n) { return e.name < n; });
      if (it == dir.entries.end() || it->name != name) return Kind::kMissing;
      if (it->known || !stat_unknown) return it->kind;
      it->kind = stat_kind(dir.fd.get(), name);
      it->known = true;
      return it->kind;
    }
    return stat_kind(dir.fd.get(), name);
  }

  static Kind stat_kind(int dir, const std::string& name) {
    struct stat st{};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Kind::kMissing;
    if (S_ISDIR(st.st_mode)) return Kind::kDirectory;
    if (S_ISREG(st.st_mode)) return Kind::kFile;
    if (S_ISLNK(st.st_mode)) return Kind::kSymlink;
    return Kind::kOther;
  }

  // The whole directory through its own descriptor, bounded; false (not listed) when it cannot
  // be read or holds more than kMaxListed entries (then each name is looked up by itself).
  static bool fill_listing(Dir& dir) {
    alignas(8) static thread_local char buf[32768];
    std::vector<Entry> entries;
    for (;;) {
      ssize_t n = ::getdents64(dir.fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return false;
      if (n == 0) break;
      for (ssize_t at = 0; at < n;) {
        auto* e = reinterpret_cast<struct dirent64*>(buf + at);
        at += e->d_reclen;
        const char* name = e->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        if (entries.size() >= kMaxListed) return false;
        Kind k = e->d_type == DT_DIR ? Kind::kDirectory : e->d_type == DT_REG ? Kind::kFile
               : e->d_type == DT_LNK ? Kind::kSymlink : Kind::kOther;
        entries.push_back({name, k, e->d_type != DT_UNKNOWN});
      }
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
    dir.entries = std::move(entries);
    dir.listed = true;
    return true;
  }

  // Opens the directory `path` one component at a time without following links, from the
  // nearest directory already open, and lists it: reads come in runs from the same functions'
  // directories. The most recently used kMaxOpenDirs stay open.
  Dir* open_directory(const std::string& path) const {
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
    Dir* parent = open_directory(slash == std::string::npos ? "" : path.substr(0, slash));
    if (!parent) return nullptr;
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (parent->listed) {
      Kind k = entry_kind(*parent, name, false);
      if (k == Kind::kMissing || k == Kind::kFile || k == Kind::kSymlink) return nullptr;
    }
    Fd fd(::openat(parent->fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    bool listable = fd.get() >= 0;
    if (!listable && errno == EACCES)  // a directory we may search but not read
      fd = Fd(::openat(parent->fd.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) return nullptr;
    // parent is not used past this point: evicting it is safe.
    last_dir_ = nullptr;
    while (dirs_.size() >= kMaxOpenDirs) {
      dirs_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(path);
    auto [it, inserted] = dirs_.try_emplace(path);
    Dir& dir = it->second;
    dir.fd = std::move(fd);
    dir.lru = lru_.begin();
    if (listable) fill_listing(dir);
    last_path_ = &it->first;
    return last_dir_ = &dir;
  }

  std::pair<Dir*, std::string> open_parent(const std::string& path) const {
    auto slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    return {open_directory(dir), name};
  }

  static constexpr size_t kFirstRead = 8192;
  static constexpr size_t kMaxListed = 1 << 16;
  fs::path host_root_;
  bool live_;
  static constexpr size_t kMaxOpenDirs = 256;
  mutable Dir root_;
  mutable bool root_tried_ = false;
  mutable std::unordered_map<std::string, Dir> dirs_;
  mutable std::list<std::string> lru_;  // most recently used first
  mutable const std::string* last_path_ = nullptr;  // the directory open_directory() gave last
  mutable Dir* last_dir_ = nullptr;
};

// A snapshot archive read in one pass into memory: nothing is written to disk, so nothing can be
// redirected, and nothing is left behind when the tool is interrupted.
class ArchiveBackend : public Sysroot::Backend {
 public:
  bool archive() const override { return true; }

  Kind kind(const std::string& path) const override {
    if (path.empty()) return Kind::kDirectory;
    auto it = entries_.find(path);
    return it == entries_.end() ? Kind::kMissing : it->second.kind;
  }
  std::optional<std::string> link_target(const std::string& path) const override {
    auto it = entries_.find(path);
    if (it == entries_.end() || it->second.kind != Kind::kSymlink) return std::nullopt;
    return it->second.target;
  }
  std::optional<std::string> read(const std::string& path, size_t max) const override {
    auto it = entries_.find(path);
    if (it == entries_.end() || it->second.kind != Kind::kFile) return std::nullopt;
    const std::string& data = *it->second.data;
    return data.size() > max ? data.substr(0, max + 1) : data;
  }
  std::optional<uint64_t> size(const std::string& path) const override {
    auto it = entries_.find(path);
    if (it == entries_.end() || it->second.kind != Kind::kFile) return std::nullopt;
    return it->second.data->size();
  }
  std::vector<std::string> list(const std::string& path, size_t) const override {
    if (kind(path) != Kind::kDirectory) return {};
    auto it = children_.find(path);
    return it == children_.end() ? std::vector<std::string>{} : it->second;
  }

  void load(const std::string& origin, int fd, const SysrootLimits& limits);

 private:
  struct Entry {
    Kind kind = Kind::kMissing;
    std::shared_ptr<const std::string> data;  // regular files; hard links share it
    std::string target;                       // symlinks
  };
  void add(const std::string& path, Entry entry);

  std::unordered_map<std::string, Entry> entries_;
  std::string last_parent_;                            // add(): the directory of the last entry
  std::vector<std::string>* last_children_ = nullptr;  // and its children_ list
  std::unordered_map<std::string, std::vector<std::string>> children_;
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
std::string entry_path(const std::string& origin, const char* raw, const SysrootLimits& limits) {
  std::string name = raw ? raw : "";
  if (name.size() > limits.max_path_bytes)
    throw InputError(fmt::format("{}: an entry name is longer than {} bytes", origin, limits.max_path_bytes));
  if (!name.empty() && name.front() == '/')
    throw InputError(fmt::format("{}: refusing archive entry '{}': absolute path", origin, escape_text(name)));
  if (is_plain_path(name)) return name;  // what the walk below gives back for it
  std::string out;
  for (const auto& part : split_path(name)) {
    if (part == "..")
      throw InputError(fmt::format("{}: refusing archive entry '{}': '..' in the path", origin, escape_text(name)));
    out = join(out, part);
  }
  return out;
}

void ArchiveBackend::add(const std::string& path, Entry entry) {
  auto [it, inserted] = entries_.insert_or_assign(path, std::move(entry));
  if (!inserted) return;
  // Record the name under its parent, creating the parent directories a tar may leave implicit.
  // A tar lists a directory's entries one after another: the last parent seen is kept at hand
  // (it exists by then, as an entry or made here), which saves two lookups of long names.
  if (auto slash = path.rfind('/'); slash != std::string::npos && last_children_ &&
                                    std::string_view(path).substr(0, slash) == last_parent_) {
    last_children_->push_back(path.substr(slash + 1));
    return;
  }
  std::string child = path;
  for (bool first = true;; first = false) {
    auto slash = child.rfind('/');
    std::string parent = slash == std::string::npos ? "" : child.substr(0, slash);
    auto& siblings = children_[parent];
    siblings.push_back(child.substr(slash == std::string::npos ? 0 : slash + 1));
    if (first && !parent.empty()) {
      last_parent_ = parent;
      last_children_ = &siblings;
    }
    if (parent.empty() || entries_.count(parent)) break;
    entries_.emplace(parent, Entry{Kind::kDirectory, nullptr, {}});
    child = parent;
  }
}

void ArchiveBackend::load(const std::string& origin, int fd, const SysrootLimits& limits) {
  struct archive* a = archive_read_new();
  // gzip only: "all filters" would run external programs (lrzip, lzop...) on a stranger's file.
  archive_read_support_filter_gzip(a);
  archive_read_support_format_tar(a);
  struct Closer {
    struct archive* a;
    ~Closer() { archive_read_free(a); }
  } closer{a};
  auto fail = [&](const std::string& what) {
    const char* why = archive_error_string(a);
    throw InputError(fmt::format("{}: {}{}{}", origin, what, why ? ": " : "", why ? why : ""));
  };
  if (archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) fail("cannot open archive");
  size_t entries = 0, total = 0, name_bytes = 0;
  std::vector<char> buf(1 << 16);
  for (;;) {
    struct archive_entry* e = nullptr;
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) fail(fmt::format("corrupt or truncated archive after {} entries", entries));
    if (++entries > limits.max_archive_entries)
      throw InputError(fmt::format("{}: more than {} entries (the limit)", origin, limits.max_archive_entries));
    std::string path = entry_path(origin, archive_entry_pathname(e), limits);
    std::string shown = escape_text(path);
    // Names cost memory as file data does: each is at most max_path_bytes, all together bounded too.
    auto count_name = [&](size_t bytes) {
      if ((name_bytes += bytes) > limits.max_archive_name_bytes)
        throw InputError(fmt::format("{}: more than {} bytes of entry names and link targets (the limit)", origin,
                                     limits.max_archive_name_bytes));
    };
    count_name(path.size());
    if (const char* hardlink = archive_entry_hardlink(e)) {
      // Only a second name for a regular file that came earlier in the same archive.
      std::string target = hardlink;
      try {
        target = entry_path(origin, hardlink, limits);
      } catch (const InputError&) {
        throw InputError(fmt::format("{}: refusing hard link '{}' to '{}': outside the archive", origin, shown,
                                     escape_text(target)));
      }
      count_name(target.size());
      auto it = entries_.find(target);
      if (it == entries_.end() || it->second.kind != Kind::kFile)
        throw InputError(fmt::format("{}: refusing hard link '{}': '{}' is not a regular file earlier in the archive",
                                     origin, shown, escape_text(target)));
      if (!path.empty()) add(path, it->second);
      continue;
    }
    unsigned type = archive_entry_filetype(e);
    if (path.empty() && type != AE_IFDIR) throw InputError(fmt::format("{}: refusing an entry named '.'", origin));
    if (type == AE_IFDIR) {
      if (!path.empty() && kind(path) != Kind::kDirectory) add(path, Entry{Kind::kDirectory, nullptr, {}});
    } else if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(e);
      std::string t = target ? target : "";
      if (t.empty() || t.size() > limits.max_path_bytes)
        throw InputError(fmt::format("{}: refusing symlink '{}': empty or overlong target", origin, shown));
      count_name(t.size());
      add(path, Entry{Kind::kSymlink, nullptr, std::move(t)});
    } else if (type == AE_IFREG) {
      std::string data;
      for (;;) {
        la_ssize_t n = archive_read_data(a, buf.data(), buf.size());
        if (n < 0) fail(fmt::format("corrupt or truncated archive in '{}'", shown));
        if (n == 0) break;
        data.append(buf.data(), static_cast<size_t>(n));
        total += static_cast<size_t>(n);
        if (data.size() > limits.max_file_bytes) too_large(origin, path, limits.max_file_bytes);
        if (total > limits.max_archive_bytes)
          throw InputError(fmt::format("{}: more than {} bytes of file data (the limit)", origin, limits.max_archive_bytes));
      }
      add(path, Entry{Kind::kFile, std::make_shared<const std::string>(std::move(data)), {}});
    } else {
      throw InputError(fmt::format("{}: refusing archive entry '{}': {}; only directories, regular files and "
                                   "symlinks are accepted", origin, shown, entry_type_name(type)));
    }
  }
  if (entries == 0) throw InputError(fmt::format("{}: archive is empty", origin));
  for (auto& [dir, names] : children_) std::sort(names.begin(), names.end());
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
  Kind kind(const std::string& p) const override { return inner_->kind(join(top_, p)); }
  std::optional<std::string> link_target(const std::string& p) const override { return inner_->link_target(join(top_, p)); }
  std::optional<std::string> read(const std::string& p, size_t max) const override { return inner_->read(join(top_, p), max); }
  std::optional<std::string> read_unless_link(const std::string& p, size_t max, bool& link) const override {
    return inner_->read_unless_link(join(top_, p), max, link);
  }
  std::optional<std::string> read_lone(const std::string& p, size_t max, bool& link) const override {
    return inner_->read_lone(join(top_, p), max, link);
  }
  std::optional<uint64_t> size(const std::string& p) const override { return inner_->size(join(top_, p)); }
  std::vector<std::string> list(const std::string& p, size_t max) const override { return inner_->list(join(top_, p), max); }
  std::optional<fs::path> host_path(const std::string& p) const override { return inner_->host_path(join(top_, p)); }

 private:
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

Sysroot Sysroot::open(const std::string& path, const SysrootLimits& limits) {
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
  archive->load(path, fd.get(), limits);
  s.backend_ = find_tree_root(path, std::move(archive), limits);
  return s;
}

Sysroot::~Sysroot() = default;
Sysroot::Sysroot(Sysroot&&) noexcept = default;
Sysroot& Sysroot::operator=(Sysroot&&) noexcept = default;

bool Sysroot::is_live() const { return backend_->live(); }
bool Sysroot::is_archive() const { return backend_->archive(); }

namespace {

constexpr size_t kMaxKnownDirectories = 1 << 20;

// Resolves every component of `parts` inside the backend as the kernel would below a chroot,
// except that ".." above the top is refused rather than clamped. With follow_last false the
// last component is not followed (lstat semantics). nullopt when missing, looping or escaping.
// `base` is a directory already resolved, where the walk starts. `directories` remembers the
// resolved paths found to be real directories, so that no walk stats them again.
std::optional<std::string> resolve_parts(const Sysroot::Backend& b, std::vector<std::string> parts, bool follow_last,
                                         const SysrootLimits& limits, std::unordered_set<std::string>& directories,
                                         const std::string& base = "") {
  std::vector<std::string> todo(parts.rbegin(), parts.rend());
  std::vector<std::string> done = split_path(base);
  std::string so_far = base;
  auto pop = [&] {
    done.pop_back();
    auto slash = so_far.rfind('/');
    so_far.resize(slash == std::string::npos ? 0 : slash);
  };
  int links = 0;
  size_t steps = 0;
  while (!todo.empty()) {
    if (++steps > limits.max_path_bytes) return std::nullopt;  // a bound even for odd link chains
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == "..") {
      if (done.empty()) return std::nullopt;  // would leave the sysroot
      pop();
      continue;
    }
    bool last = todo.empty();
    done.push_back(part);
    so_far = join(so_far, part);
    if (so_far.size() > limits.max_path_bytes) return std::nullopt;
    Kind k = directories.count(so_far) ? Kind::kDirectory : b.kind(so_far);
    if (k == Kind::kMissing) return std::nullopt;
    if (k == Kind::kDirectory && directories.size() < kMaxKnownDirectories) directories.insert(so_far);
    if (k == Kind::kSymlink && (!last || follow_last)) {
      if (++links > limits.max_symlinks) return std::nullopt;
      auto target = b.link_target(so_far);
      if (!target) return std::nullopt;
      pop();
      if (!target->empty() && target->front() == '/') {
        done.clear();
        so_far.clear();
      }
      auto more = split_path(*target);
      for (auto it = more.rbegin(); it != more.rend(); ++it) todo.push_back(*it);
      continue;
    }
    if (!last && k != Kind::kDirectory) return std::nullopt;
  }
  return so_far;
}

}  // namespace

// A path's directory is resolved once: the reader asks for a dozen files in each function's
// directory, and resolving walks (and stats) every component of a deep sysfs path.
std::optional<std::string> Sysroot::resolve_directory(std::vector<std::string> parts) const {
  std::string dir = fmt::format("{}", fmt::join(parts, "/"));
  auto cached = resolved_dirs_.find(dir);
  if (cached == resolved_dirs_.end()) {
    auto resolved = resolve_parts(*backend_, std::move(parts), true, limits_, directories_);
    if (resolved && !directories_.count(*resolved) && backend_->kind(*resolved) != Kind::kDirectory) resolved.reset();
    if (resolved_dirs_.size() >= kMaxResolvedDirs) resolved_dirs_.clear();  // a bound, not an expected case
    // What it resolved to holds no link and is a directory: it resolves to itself. The reader
    // goes on by that path (a function's sysfs_path) and so finds it at once.
    if (resolved && *resolved != dir) resolved_dirs_.emplace(*resolved, resolved);
    cached = resolved_dirs_.emplace(dir, resolved).first;
  }
  return cached->second;
}

std::optional<std::string> Sysroot::resolve_path(const std::string& relative, bool follow_last) const {
  // A plain path whose directory is already resolved: only its last component is looked at, as
  // resolve_parts() would from that directory (a link to follow takes the general walk below).
  if (auto slash = relative.rfind('/'); slash != std::string::npos && is_plain_path(relative)) {
    if (follow_last)
      if (auto known = resolved_dirs_.find(relative); known != resolved_dirs_.end() && known->second) return known->second;
    if (auto dir = resolved_dirs_.find(relative.substr(0, slash)); dir != resolved_dirs_.end()) {
      if (!dir->second) return std::nullopt;
      std::string path = join(*dir->second, relative.substr(slash + 1));
      if (path.size() > limits_.max_path_bytes) return std::nullopt;
      Kind k = directories_.count(path) ? Kind::kDirectory : backend_->kind(path);
      if (k == Kind::kMissing) return std::nullopt;
      if (k != Kind::kSymlink || !follow_last) return path;
    }
  }
  auto parts = split_path(relative);
  // A directory already resolved (a function's, reached through its sys/bus/pci/devices link)
  // needs no second walk: followed to the end, it resolves to what resolve_directory() found.
  if (follow_last && !parts.empty())
    if (auto known = resolved_dirs_.find(fmt::format("{}", fmt::join(parts, "/"))); known != resolved_dirs_.end() && known->second)
      return known->second;
  if (parts.size() < 2 || parts.back() == "..")
    return resolve_parts(*backend_, std::move(parts), follow_last, limits_, directories_);
  std::string last = std::move(parts.back());
  parts.pop_back();
  auto dir = resolve_directory(std::move(parts));
  if (!dir) return std::nullopt;
  return resolve_parts(*backend_, {last}, follow_last, limits_, directories_, *dir);
}

// A file in a resolved directory is opened at once, not looked at first; only a link is resolved.
std::optional<std::string> Sysroot::read_file(const std::string& relative, size_t max, bool lone) const {
  // The reader's paths are plain ("dir/.../name"): their directory, once resolved, is found by
  // its text alone, without splitting and joining the path again.
  if (auto slash = relative.rfind('/'); slash != std::string::npos && is_plain_path(relative)) {
    if (auto known = resolved_dirs_.find(relative.substr(0, slash)); known != resolved_dirs_.end()) {
      if (!known->second) return std::nullopt;
      bool link = false;
      const std::string file = join(*known->second, relative.substr(slash + 1));
      auto data = lone ? backend_->read_lone(file, max, link) : backend_->read_unless_link(file, max, link);
      if (!link) return data;
      auto path = resolve(relative);
      if (!path) return std::nullopt;
      return backend_->read(*path, max);
    }
  }
  auto parts = split_path(relative);
  if (parts.size() >= 2 && parts.back() != "..") {
    std::string last = std::move(parts.back());
    parts.pop_back();
    auto dir = resolve_directory(std::move(parts));
    if (!dir) return std::nullopt;
    bool link = false;
    auto data = lone ? backend_->read_lone(join(*dir, last), max, link) : backend_->read_unless_link(join(*dir, last), max, link);
    if (!link) return data;
  }
  auto path = resolve(relative);
  if (!path) return std::nullopt;
  return backend_->read(*path, max);
}

std::optional<std::string> Sysroot::resolve(const std::string& relative) const { return resolve_path(relative, true); }

bool Sysroot::exists(const std::string& relative) const {
  if (split_path(relative).empty()) return true;
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
  if (split_path(relative).empty()) return std::nullopt;
  auto path = resolve_path(relative, false);
  if (!path || backend_->kind(*path) != Kind::kSymlink) return std::nullopt;
  return backend_->link_target(*path);
}

std::vector<std::string> Sysroot::list(const std::string& relative) const {
  auto path = resolve(relative);
  if (!path) return {};
  auto names = backend_->list(*path, limits_.max_directory_entries);
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<fs::path> Sysroot::confined_directory(const std::string& relative) const {
  auto path = resolve(relative);
  if (!path || backend_->kind(*path) != Kind::kDirectory) return std::nullopt;
  return backend_->host_path(*path);
}

}  // namespace p2paudit
