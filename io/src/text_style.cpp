// SPDX-License-Identifier: GPL-2.0-or-later
#include "p2paudit/text_style.h"

#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <ostream>
#include <random>
#include <streambuf>

#include "p2paudit/input_file.h"

namespace p2paudit {

namespace {

// ESC and 24 random letters: a control of the tool's own is the marker followed by the control
// byte. Input that holds ESC cannot hold the marker (it does not know it), so its ESC is escaped.
std::string g_marker;
std::atomic<int> g_gates{0};

std::string new_marker() {
  unsigned char random[24];
  ssize_t got = getrandom(random, sizeof random, 0);
  if (got != static_cast<ssize_t>(sizeof random)) {
    std::random_device device;
    for (auto& r : random) r = static_cast<unsigned char>(device());
  }
  std::string m = "\x1b";
  for (unsigned char r : random) m += static_cast<char>('a' + r % 26);
  return m;
}

bool is_control_byte(unsigned char c) { return c < 0x20 || c == 0x7f; }

}  // namespace

std::string own_controls(std::string_view controls) {
  if (g_gates.load() == 0) return std::string(controls);
  std::string out;
  for (char c : controls) {
    if (is_control_byte(static_cast<unsigned char>(c))) out += g_marker;
    out += c;
  }
  return out;
}

std::string TextStyle::paint(std::string_view text, Tone tone) const {
  if (!colour) return std::string(text);
  const char* start = "";
  switch (tone) {
    case Tone::kGood: start = "\033[32m"; break;     // green
    case Tone::kCaution: start = "\033[33m"; break;  // yellow
    case Tone::kBad: start = "\033[31m"; break;      // red
    case Tone::kUnknown: start = "\033[35m"; break;  // magenta
    case Tone::kEmphasis: start = "\033[1m"; break;  // bold
  }
  return own_controls(start).append(text).append(own_controls("\033[0m"));
}

// Holds what was written until a line ends or the stream is flushed (std::cerr flushes after
// every insertion), so that a UTF-8 sequence or a marker is never judged in halves.
class TextGate::Buffer : public std::streambuf {
 public:
  explicit Buffer(std::streambuf* out) : out_(out) {}

  void release() {
    pass(pending_);
    pending_.clear();
  }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    char c = traits_type::to_char_type(ch);
    return xsputn(&c, 1) == 1 ? ch : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    pending_.append(s, static_cast<size_t>(n));
    if (pending_.size() >= kHold) {  // whole lines now; a partial line waits for the rest or a flush
      size_t end = pending_.rfind('\n');
      if (end != std::string::npos) {
        pass(std::string_view(pending_).substr(0, end + 1));
        pending_.erase(0, end + 1);
      }
    }
    return n;
  }
  int sync() override {
    release();
    return out_->pubsync();
  }

 private:
  static constexpr size_t kHold = 1 << 16;

  void write(std::string_view s) { out_->sputn(s.data(), static_cast<std::streamsize>(s.size())); }

  // Text between the tool's own controls: each line escaped on its own, the line feeds kept.
  void text(std::string_view s) {
    for (size_t start = 0; start <= s.size();) {
      size_t end = s.find('\n', start);
      std::string_view line = s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      if (!line.empty()) write(is_clean_text(line) ? std::string(line) : escape_text(line));
      if (end == std::string_view::npos) break;
      write("\n");
      start = end + 1;
    }
  }

  void pass(std::string_view s) {
    const std::string& marker = g_marker;
    size_t start = 0;
    for (size_t at; !marker.empty() && (at = s.find(marker, start)) != std::string_view::npos;) {
      if (at + marker.size() >= s.size()) break;  // a marker without its control: escaped as text
      text(s.substr(start, at - start));
      char own = s[at + marker.size()];
      if (is_control_byte(static_cast<unsigned char>(own))) write(std::string_view(&own, 1));
      else text(std::string_view(&own, 1));
      start = at + marker.size() + 1;
    }
    text(s.substr(start));
  }

  std::streambuf* out_;
  std::string pending_;
};

TextGate::TextGate(std::ostream& stream)
    : stream_(stream), original_(stream.rdbuf()), buffer_(std::make_unique<Buffer>(original_)) {
  if (g_gates.fetch_add(1) == 0 && g_marker.empty()) g_marker = new_marker();
  stream_.flush();
  stream_.rdbuf(buffer_.get());
}

TextGate::~TextGate() {
  // Escaping what is held allocates, and an exception leaving a destructor ends the process without
  // a word: out of memory here drops what is held (never written unescaped) and says so.
  try {
    stream_.flush();
    buffer_->release();
  } catch (...) {
    static constexpr std::string_view kLost = "\n(the rest of this output was lost: out of memory)\n";
    try {
      original_->sputn(kLost.data(), static_cast<std::streamsize>(kLost.size()));
    } catch (...) {  // a stream that allocates to write (a string's) may fail once more
    }
  }
  stream_.rdbuf(original_);
  original_->pubsync();
  g_gates.fetch_sub(1);
}

}  // namespace p2paudit
