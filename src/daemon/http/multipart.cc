#include "daemon/http/multipart.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace ci::daemon {
namespace {

Status Invalid(std::string_view why) {
  return Status::Error("Invalid multipart body: " + std::string(why));
}

char ToLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string Lowercase(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), ToLower);
  return out;
}

bool IsWhitespace(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsWhitespace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsWhitespace(s.back())) s.remove_suffix(1);
  return s;
}

// A header value of the form `type; name=value; name="quoted \" value"` (RFC 7231 section 3.1.1.1
// syntax, shared by Content-Type and Content-Disposition).
struct HeaderValue {
  std::string type;                                         // lowercased
  std::vector<std::pair<std::string, std::string>> params;  // names lowercased, values unquoted

  const std::string* Param(std::string_view name) const {
    for (const auto& [key, value] : params) {
      if (key == name) return &value;
    }
    return nullptr;
  }
};

Result<HeaderValue> ParseHeaderValue(std::string_view header, std::string_view what) {
  HeaderValue out;
  size_t semi = header.find(';');
  out.type = Lowercase(Trim(header.substr(0, semi)));
  if (semi == std::string_view::npos) return out;
  std::string_view rest = header.substr(semi + 1);
  while (true) {
    rest = Trim(rest);
    if (rest.empty()) break;
    if (rest.front() == ';') {  // tolerate empty parameters ("a; ; b=c")
      rest.remove_prefix(1);
      continue;
    }
    size_t eq = rest.find('=');
    if (eq == std::string_view::npos) {
      return Invalid("malformed parameter in " + std::string(what));
    }
    std::string name = Lowercase(Trim(rest.substr(0, eq)));
    if (name.empty()) return Invalid("malformed parameter in " + std::string(what));
    rest = Trim(rest.substr(eq + 1));
    std::string value;
    if (!rest.empty() && rest.front() == '"') {
      // quoted-string: a backslash escapes the next character (RFC 7230 quoted-pair). It must be
      // scanned rather than split on ';', which may occur inside the quotes.
      size_t i = 1;
      bool closed = false;
      for (; i < rest.size(); ++i) {
        char c = rest[i];
        if (c == '\\' && i + 1 < rest.size()) {
          value.push_back(rest[++i]);
        } else if (c == '"') {
          closed = true;
          ++i;
          break;
        } else {
          value.push_back(c);
        }
      }
      if (!closed) return Invalid("unterminated quoted string in " + std::string(what));
      rest.remove_prefix(i);
      rest = Trim(rest);
      if (!rest.empty() && rest.front() != ';') {
        return Invalid("malformed parameter in " + std::string(what));
      }
    } else {
      size_t end = rest.find(';');
      value = std::string(Trim(rest.substr(0, end)));
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    }
    out.params.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = ToLower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Decodes an RFC 5987 ext-value (`UTF-8''a%20b.txt`). nullopt when the charset is neither UTF-8
// nor ISO-8859-1 or the encoding is broken: RFC 6266 says to ignore such a parameter and fall
// back to the plain `filename`.
std::optional<std::string> DecodeExtValue(std::string_view v) {
  size_t q1 = v.find('\'');
  if (q1 == std::string_view::npos) return std::nullopt;
  size_t q2 = v.find('\'', q1 + 1);
  if (q2 == std::string_view::npos) return std::nullopt;
  std::string charset = Lowercase(v.substr(0, q1));
  bool latin1 = charset == "iso-8859-1";
  if (charset != "utf-8" && !latin1) return std::nullopt;
  std::string out;
  for (size_t i = q2 + 1; i < v.size(); ++i) {
    unsigned char byte = static_cast<unsigned char>(v[i]);
    if (byte == '%') {
      if (i + 2 >= v.size()) return std::nullopt;
      int hi = HexValue(v[i + 1]);
      int lo = HexValue(v[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      byte = static_cast<unsigned char>(hi * 16 + lo);
      i += 2;
    }
    if (latin1 && byte >= 0x80) {  // ISO-8859-1 code points map 1:1 onto U+0080..U+00FF
      out.push_back(static_cast<char>(0xC0 | (byte >> 6)));
      out.push_back(static_cast<char>(0x80 | (byte & 0x3F)));
    } else {
      out.push_back(static_cast<char>(byte));
    }
  }
  return out;
}

Result<MultipartPartHeaders> ParsePartHeaders(std::string_view block) {
  // Unfold obsolete continuation lines and split into fields.
  std::vector<std::string> fields;
  size_t pos = 0;
  while (pos < block.size()) {
    size_t end = block.find("\r\n", pos);
    if (end == std::string_view::npos) end = block.size();
    std::string_view line = block.substr(pos, end - pos);
    pos = end + 2;
    if (line.find_first_of("\r\n") != std::string_view::npos) {
      return Invalid("bare CR or LF in part headers");
    }
    if (!line.empty() && IsWhitespace(line.front())) {
      if (fields.empty()) return Invalid("malformed part header line");
      fields.back().append(" ").append(Trim(line));
      continue;
    }
    fields.emplace_back(line);
  }

  MultipartPartHeaders out;
  std::optional<std::string> disposition;
  for (const std::string& field : fields) {
    size_t colon = field.find(':');
    if (colon == std::string::npos || colon == 0) return Invalid("malformed part header line");
    std::string name = Lowercase(Trim(std::string_view(field).substr(0, colon)));
    std::string_view value = Trim(std::string_view(field).substr(colon + 1));
    if (name == "content-disposition") {
      disposition = std::string(value);
    } else if (name == "content-type") {
      out.content_type = std::string(value);
    }
  }
  if (!disposition) return Invalid("part without a Content-Disposition header");
  Result<HeaderValue> parsed = ParseHeaderValue(*disposition, "Content-Disposition");
  if (!parsed.ok()) return parsed.status();
  if (parsed->type != "form-data") return Invalid("Content-Disposition of a part is not form-data");
  const std::string* name = parsed->Param("name");
  if (name == nullptr) return Invalid("part without a name");
  out.name = *name;
  if (const std::string* ext = parsed->Param("filename*")) {
    out.filename = DecodeExtValue(*ext);
  }
  if (!out.filename) {
    if (const std::string* plain = parsed->Param("filename")) out.filename = *plain;
  }
  return out;
}

}  // namespace

Result<std::string> MultipartParser::BoundaryFromContentType(std::string_view content_type) {
  Result<HeaderValue> parsed = ParseHeaderValue(content_type, "Content-Type");
  if (!parsed.ok()) return parsed.status();
  if (parsed->type != "multipart/form-data") {
    return Invalid("Content-Type is not multipart/form-data");
  }
  const std::string* boundary = parsed->Param("boundary");
  if (boundary == nullptr) return Invalid("Content-Type has no boundary parameter");
  // RFC 2046 section 5.1.1: 1 to 70 characters. Control characters would make the delimiter
  // ambiguous with line breaks.
  if (boundary->empty() || boundary->size() > 70) {
    return Invalid("boundary must be 1 to 70 characters long");
  }
  for (unsigned char c : *boundary) {
    if (c < 0x20 || c >= 0x7f) return Invalid("boundary contains an invalid character");
  }
  return *boundary;
}

MultipartParser::MultipartParser(std::string boundary, Callbacks cb)
    : delimiter_("\r\n--" + std::move(boundary)), cb_(std::move(cb)), held_("\r\n") {}

Status MultipartParser::Feed(std::string_view chunk) {
  if (state_ == State::kFailed) return error_;
  if (Status s = Process(chunk); !s.ok()) {
    state_ = State::kFailed;
    error_ = s;
    return error_;
  }
  return Status();
}

Status MultipartParser::Process(std::string_view chunk) {
  while (!chunk.empty() && state_ != State::kDone) {
    Result<size_t> consumed = size_t{0};
    switch (state_) {
      case State::kPreamble:
      case State::kBody:
        consumed = ScanForDelimiter(chunk);
        break;
      case State::kHeaders:
        consumed = ScanHeaders(chunk);
        break;
      default:
        consumed = ScanDelimiterSuffix(chunk);
        break;
    }
    if (!consumed.ok()) return consumed.status();
    chunk.remove_prefix(*consumed);
  }
  return Status();
}

Status MultipartParser::Finish() {
  if (state_ == State::kFailed) return error_;
  if (state_ != State::kDone) {
    state_ = State::kFailed;
    error_ = Invalid("missing closing boundary");
    return error_;
  }
  return Status();
}

Status MultipartParser::EmitData(std::string_view data) {
  // Preamble bytes are discarded (RFC 2046 section 5.1.1).
  if (state_ != State::kBody || data.empty() || !cb_.on_part_data) return Status();
  return cb_.on_part_data(data);
}

Status MultipartParser::RejectDelimiter() {
  // Like python-multipart (behind the onyx service), a boundary line followed by anything but
  // "--" or CRLF is data, not an error. The bytes after it go through the scanner again: they
  // can hold the CR that starts the real delimiter. They never contain a whole delimiter (no LF).
  state_ = delimiter_in_body_ ? State::kBody : State::kPreamble;
  if (Status s = EmitData(delimiter_); !s.ok()) return s;
  std::string replay = std::move(suffix_);
  suffix_.clear();
  return Process(replay);
}

size_t MultipartParser::PartialDelimiterSuffix(std::string_view data) const {
  // The longest suffix of `data` that is a proper prefix of the delimiter. The delimiter starts
  // with CR, so only positions holding a CR can begin one; the earliest gives the longest.
  size_t window = std::min(data.size(), delimiter_.size() - 1);
  for (size_t i = data.size() - window; i < data.size(); ++i) {
    if (data[i] == '\r' && delimiter_.compare(0, data.size() - i, data, i) == 0) {
      return data.size() - i;
    }
  }
  return 0;
}

Result<size_t> MultipartParser::ScanForDelimiter(std::string_view chunk) {
  const size_t dlen = delimiter_.size();
  if (!held_.empty()) {
    // Enough new bytes to complete any delimiter that starts inside held_.
    size_t take = std::min(chunk.size(), dlen - 1);
    std::string window = held_ + std::string(chunk.substr(0, take));
    size_t at = window.find(delimiter_);
    if (at != std::string::npos) {  // necessarily starts inside held_
      size_t consumed = at + dlen - held_.size();
      held_.clear();
      if (Status s = EmitData(std::string_view(window).substr(0, at)); !s.ok()) return s;
      delimiter_in_body_ = state_ == State::kBody;
      state_ = State::kAfterBoundary;
      return consumed;
    }
    if (take < dlen - 1) {
      // Too few bytes to decide: everything seen is either data or a still-open prefix.
      size_t keep = PartialDelimiterSuffix(window);
      held_ = window.substr(window.size() - keep);
      if (Status s = EmitData(std::string_view(window).substr(0, window.size() - keep)); !s.ok()) {
        return s;
      }
      return chunk.size();
    }
    // No delimiter starts inside held_, so it is all data; scan the chunk from its start.
    std::string data = std::move(held_);
    held_.clear();
    if (Status s = EmitData(data); !s.ok()) return s;
  }

  size_t at = chunk.find(delimiter_);
  if (at != std::string_view::npos) {
    if (Status s = EmitData(chunk.substr(0, at)); !s.ok()) return s;
    delimiter_in_body_ = state_ == State::kBody;
    state_ = State::kAfterBoundary;
    return at + dlen;
  }
  size_t keep = PartialDelimiterSuffix(chunk);
  held_ = std::string(chunk.substr(chunk.size() - keep));
  if (Status s = EmitData(chunk.substr(0, chunk.size() - keep)); !s.ok()) return s;
  return chunk.size();
}

Result<size_t> MultipartParser::ScanDelimiterSuffix(std::string_view chunk) {
  // "--" closes the body; otherwise transport padding (linear whitespace, RFC 2046 section 5.1.1)
  // then CRLF, then the next part's headers. Only then does the previous part end.
  char c = chunk.front();
  State next = State::kFailed;
  switch (state_) {
    case State::kAfterBoundary:
      if (c == '-') next = State::kCloseDash;
      if (c == '\r') next = State::kExpectLf;
      if (IsWhitespace(c)) next = State::kPadding;
      break;
    case State::kCloseDash:
      if (c == '-') next = State::kDone;
      break;
    case State::kPadding:
      if (c == '\r') next = State::kExpectLf;
      if (IsWhitespace(c) && suffix_.size() < kMaxPadding) next = State::kPadding;
      break;
    case State::kExpectLf:
      if (c == '\n') next = State::kHeaders;
      break;
    default:
      break;
  }
  if (next == State::kFailed) {
    // Not a delimiter after all; `c` is scanned again in the restored state.
    if (Status s = RejectDelimiter(); !s.ok()) return s;
    return size_t{0};
  }
  suffix_.push_back(c);
  state_ = next;
  if (next == State::kDone || next == State::kHeaders) {
    suffix_.clear();
    // Seeded with CRLF so that an empty header block (the data starts at once) ends at the same
    // CRLF CRLF as a non-empty one.
    if (next == State::kHeaders) header_block_ = "\r\n";
    if (delimiter_in_body_ && cb_.on_part_end) {
      if (Status s = cb_.on_part_end(); !s.ok()) return s;
    }
  }
  return size_t{1};
}

Result<size_t> MultipartParser::ScanHeaders(std::string_view chunk) {
  static constexpr std::string_view kEnd = "\r\n\r\n";
  const size_t limit = kMaxHeaderBytes + 2 + kEnd.size();  // seed + headers + terminator
  size_t before = header_block_.size();
  size_t take = std::min(chunk.size(), limit - before);
  header_block_.append(chunk.substr(0, take));
  // The terminator may straddle the previous chunk: resume the search a few bytes back.
  size_t from = before >= kEnd.size() - 1 ? before - (kEnd.size() - 1) : 0;
  size_t end = header_block_.find(kEnd, from);
  if (end == std::string::npos) {
    if (header_block_.size() >= limit) {
      return Invalid("part headers exceed " + std::to_string(kMaxHeaderBytes) + " bytes");
    }
    return take;
  }
  size_t consumed = end + kEnd.size() - before;
  std::string_view block = std::string_view(header_block_).substr(2, end > 2 ? end - 2 : 0);
  Result<MultipartPartHeaders> headers = ParsePartHeaders(block);
  header_block_.clear();
  header_block_.shrink_to_fit();
  if (!headers.ok()) return headers.status();
  state_ = State::kBody;
  if (cb_.on_part_begin) {
    if (Status s = cb_.on_part_begin(*headers); !s.ok()) return s;
  }
  return consumed;
}

}  // namespace ci::daemon
