#include "p2paudit/sysroot.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "p2paudit/errors.h"

namespace fs = std::filesystem;

namespace p2paudit {

namespace {

fs::path make_private_temp_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = fmt::format("{}/p2paudit-sysroot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(templ.data()))  // mkdtemp creates it 0700: only we can read what is unpacked
    throw InputError(fmt::format("cannot create a temporary directory in {}: {}",
                                 tmp && *tmp ? tmp : "/tmp", std::strerror(errno)));
  return templ;
}

// Unpacks the archive below dest, refusing absolute paths, ".." and writes through symlinks.
void unpack_archive(const std::string& origin, const fs::path& dest) {
  struct archive* in = archive_read_new();
  archive_read_support_filter_all(in);
  archive_read_support_format_tar(in);
  archive_read_support_format_gnutar(in);
  struct archive* out = archive_write_disk_new();
  // Names are checked below and rebased onto dest (an absolute path), so only the symlink and ".."
  // guards are left to libarchive.
  archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT);
  auto fail = [&](struct archive* a, const std::string& what) {
    std::string msg = fmt::format("{}: {}: {}", origin, what,
                                  archive_error_string(a) ? archive_error_string(a) : "unknown error");
    archive_read_free(in);
    archive_write_free(out);
    throw InputError(msg);
  };
  if (archive_read_open_filename(in, origin.c_str(), 1 << 16) != ARCHIVE_OK)
    fail(in, "cannot open archive");
  size_t entries = 0;
  for (;;) {
    struct archive_entry* entry = nullptr;
    int r = archive_read_next_header(in, &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) fail(in, fmt::format("corrupt or truncated archive after {} entries", entries));
    ++entries;
    std::string name = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
    if (name.empty() || name.front() == '/' || name == ".." || name.find("../") != std::string::npos)
      fail(in, fmt::format("refusing archive entry '{}'", name));
    archive_entry_set_pathname(entry, (dest / name).c_str());
    // Hard links in the archive are named relative to its root too.
    if (const char* hl = archive_entry_hardlink(entry)) archive_entry_set_hardlink(entry, (dest / hl).c_str());
    archive_entry_set_perm(entry, archive_entry_filetype(entry) == AE_IFDIR ? 0700 : 0600);
    if (archive_write_header(out, entry) != ARCHIVE_OK) fail(out, fmt::format("cannot unpack '{}'", name));
    const void* buf;
    size_t size;
    la_int64_t offset;
    while ((r = archive_read_data_block(in, &buf, &size, &offset)) == ARCHIVE_OK)
      if (archive_write_data_block(out, buf, size, offset) != ARCHIVE_OK) fail(out, fmt::format("cannot unpack '{}'", name));
    if (r != ARCHIVE_EOF) fail(in, fmt::format("corrupt or truncated archive in '{}'", name));
    archive_write_finish_entry(out);
  }
  archive_read_free(in);
  archive_write_free(out);
  if (entries == 0) throw InputError(fmt::format("{}: archive is empty", origin));
}

// A capture may hold the tree at its top or inside one directory (e.g. "sysroot/").
fs::path find_tree_root(const std::string& origin, const fs::path& dir) {
  auto has_tree = [](const fs::path& p) { return fs::is_directory(p / "sys") || fs::is_directory(p / "proc"); };
  if (has_tree(dir)) return dir;
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && !e.is_symlink()) subdirs.push_back(e.path());
  if (subdirs.size() == 1 && has_tree(subdirs[0])) return subdirs[0];
  throw InputError(fmt::format("{}: not a sysroot: no sys/ or proc/ at its top", origin));
}

std::vector<std::string> split_path(const std::string& p) {
  std::vector<std::string> parts;
  std::stringstream ss(p);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (!part.empty() && part != ".") parts.push_back(part);
  return parts;
}

}  // namespace

Sysroot Sysroot::open(const std::string& path) {
  Sysroot s;
  s.origin_ = path;
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw InputError(fmt::format("{}: no such file or directory", path));
  if (fs::is_directory(st)) {
    s.root_ = fs::canonical(path, ec);
    if (ec) throw InputError(fmt::format("{}: {}", path, ec.message()));
    s.live_ = s.root_ == "/";
    if (!s.live_) s.root_ = find_tree_root(path, s.root_);
    return s;
  }
  if (!fs::is_regular_file(st)) throw InputError(fmt::format("{}: neither a directory nor a snapshot file", path));
  if (!path.ends_with(".tar.gz") && !path.ends_with(".tgz") && !path.ends_with(".tar"))
    throw InputError(fmt::format("{}: a snapshot must be a directory or a .tar.gz file", path));
  s.temp_dir_ = fs::canonical(make_private_temp_dir());
  try {
    unpack_archive(path, s.temp_dir_);
    s.root_ = find_tree_root(path, s.temp_dir_);
  } catch (...) {
    fs::remove_all(s.temp_dir_, ec);
    s.temp_dir_.clear();
    throw;
  }
  return s;
}

Sysroot::~Sysroot() {
  if (!temp_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(temp_dir_, ec);
  }
}

Sysroot::Sysroot(Sysroot&& o) noexcept
    : origin_(std::move(o.origin_)), root_(std::move(o.root_)), temp_dir_(std::move(o.temp_dir_)), live_(o.live_) {
  o.temp_dir_.clear();
}

Sysroot& Sysroot::operator=(Sysroot&& o) noexcept {
  if (this != &o) {
    if (!temp_dir_.empty()) {
      std::error_code ec;
      fs::remove_all(temp_dir_, ec);
    }
    origin_ = std::move(o.origin_);
    root_ = std::move(o.root_);
    temp_dir_ = std::move(o.temp_dir_);
    live_ = o.live_;
    o.temp_dir_.clear();
  }
  return *this;
}

fs::path Sysroot::path(const std::string& relative) const {
  std::string rel = relative;
  while (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
  return rel.empty() ? root_ : root_ / rel;
}

bool Sysroot::exists(const std::string& relative) const {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path(relative), ec));
}

std::optional<std::string> Sysroot::read_text(const std::string& relative) const {
  std::ifstream in(path(relative), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

std::optional<std::string> Sysroot::read_line(const std::string& relative) const {
  auto text = read_text(relative);
  if (!text) return std::nullopt;
  auto nl = text->find('\n');
  if (nl != std::string::npos) text->resize(nl);
  return text;
}

std::optional<std::vector<uint8_t>> Sysroot::read_bytes(const std::string& relative, size_t max) const {
  std::ifstream in(path(relative), std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<uint8_t> buf(max);
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(max));
  buf.resize(static_cast<size_t>(in.gcount()));
  return buf;
}

std::optional<std::string> Sysroot::read_link(const std::string& relative) const {
  std::error_code ec;
  auto target = fs::read_symlink(path(relative), ec);
  if (ec) return std::nullopt;
  return target.string();
}

std::optional<std::string> Sysroot::resolve(const std::string& relative) const {
  std::vector<std::string> done;
  std::vector<std::string> todo = split_path(relative);
  std::reverse(todo.begin(), todo.end());
  int links = 0;
  while (!todo.empty()) {
    std::string part = todo.back();
    todo.pop_back();
    if (part == "..") {
      if (done.empty()) return std::nullopt;  // would leave the sysroot
      done.pop_back();
      continue;
    }
    done.push_back(part);
    std::string so_far;
    for (const auto& d : done) so_far += (so_far.empty() ? "" : "/") + d;
    std::error_code ec;
    auto st = fs::symlink_status(path(so_far), ec);
    if (ec || !fs::exists(st)) return std::nullopt;
    if (fs::is_symlink(st)) {
      if (++links > 40) return std::nullopt;
      auto target = read_link(so_far);
      if (!target) return std::nullopt;
      done.pop_back();
      if (!target->empty() && target->front() == '/') done.clear();
      auto parts = split_path(*target);
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
    }
  }
  std::string out;
  for (const auto& d : done) out += (out.empty() ? "" : "/") + d;
  return out;
}

std::vector<std::string> Sysroot::list(const std::string& relative) const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(path(relative), ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace p2paudit
