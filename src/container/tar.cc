#include "container/tar.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace ci::container {
namespace {

constexpr size_t kBlock = 512;
// A sparse map longer than this is not from a workspace of ordinary size (each piece of data
// between holes is an entry): refused rather than held in memory.
constexpr size_t kMaxSparsePieces = size_t{1} << 18;

void Octal(char* field, size_t width, uint64_t value) {
  // width-1 zero-padded octal digits and a NUL, as GNU tar writes them.
  field[width - 1] = '\0';
  for (size_t i = width - 1; i-- > 0; value >>= 3) field[i] = static_cast<char>('0' + (value & 7));
}

std::string Block(std::string_view name, std::string_view prefix, uint64_t size, char type,
                  uint32_t mode, uint32_t uid, uint32_t gid) {
  std::string h(kBlock, '\0');
  std::memcpy(&h[0], name.data(), std::min<size_t>(name.size(), 100));
  Octal(&h[100], 8, mode);
  Octal(&h[108], 8, uid);
  Octal(&h[116], 8, gid);
  Octal(&h[124], 12, size);
  Octal(&h[136], 12, 0);
  std::memset(&h[148], ' ', 8);
  h[156] = type;
  std::memcpy(&h[257],
              "ustar\0"
              "00",
              8);
  std::memcpy(&h[345], prefix.data(), std::min<size_t>(prefix.size(), 155));
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  Octal(&h[148], 7, sum);  // six digits, a NUL, then the space already there
  h[155] = ' ';
  return h;
}

uint64_t ParseOctal(std::string_view f) {
  if (!f.empty() && (static_cast<unsigned char>(f[0]) & 0x80)) {  // GNU base-256
    uint64_t v = 0;
    for (size_t i = 1; i < f.size(); ++i) v = (v << 8) | static_cast<unsigned char>(f[i]);
    return v;
  }
  uint64_t v = 0;
  for (char c : f) {
    if (c >= '0' && c <= '7') {
      v = v * 8 + static_cast<uint64_t>(c - '0');
    } else if (c != ' ' && c != '\0') {
      break;
    }
  }
  return v;
}

std::string CString(const char* p, size_t max) { return std::string(p, strnlen(p, max)); }

// "./a//b/" -> "a/b"; empty on "." itself; error on absolute or "..".
Result<std::string> Normalise(const std::string& raw) {
  if (!raw.empty() && raw.front() == '/') return Status::Error("absolute path in tar: " + raw);
  std::string out;
  size_t i = 0;
  while (i <= raw.size()) {
    size_t j = raw.find('/', i);
    if (j == std::string::npos) j = raw.size();
    std::string_view part(raw.data() + i, j - i);
    if (part == "..") return Status::Error("'..' in tar path: " + raw);
    if (!part.empty() && part != ".") {
      if (!out.empty()) out += '/';
      out += part;
    }
    i = j + 1;
  }
  return out;
}

uint64_t Pad(uint64_t size) { return (kBlock - size % kBlock) % kBlock; }

}  // namespace

std::string TarHeader(std::string_view path, uint64_t size, bool directory, uint32_t mode,
                      uint32_t uid, uint32_t gid) {
  std::string name(path);
  if (directory && (name.empty() || name.back() != '/')) name += '/';
  char type = directory ? '5' : '0';
  if (name.size() <= 100) return Block(name, {}, size, type, mode, uid, gid);
  // ustar prefix/name split at a '/' when both halves fit.
  for (size_t slash = name.find('/'); slash != std::string::npos;
       slash = name.find('/', slash + 1)) {
    if (slash <= 155 && name.size() - slash - 1 <= 100 && slash + 1 < name.size()) {
      return Block(std::string_view(name).substr(slash + 1),
                   std::string_view(name).substr(0, slash), size, type, mode, uid, gid);
    }
  }
  std::string out = Block("././@LongLink", {}, name.size() + 1, 'L', 0, 0, 0);
  out += name;
  out.push_back('\0');
  out += TarPadding(name.size() + 1);
  out += Block(std::string_view(name).substr(0, 100), {}, size, type, mode, uid, gid);
  return out;
}

std::string TarPadding(uint64_t size) { return std::string(Pad(size), '\0'); }

std::string TarTrailer(uint64_t archive_size) {
  const uint64_t end = archive_size + 2 * kBlock;
  return std::string(2 * kBlock + (kTarRecord - end % kTarRecord) % kTarRecord, '\0');
}

Status TarReader::Feed(std::string_view bytes) {
  while (!bytes.empty() && !stopped_ && !finished_) {
    if (mode_ == Mode::kHeader || mode_ == Mode::kSparseMap) {
      if (mode_ == Mode::kHeader && padding_ > 0) {  // the previous member's padding
        size_t n = std::min<uint64_t>(padding_, bytes.size());
        padding_ -= n;
        bytes.remove_prefix(n);
        continue;
      }
      size_t n = std::min(kBlock - header_.size(), bytes.size());
      header_.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      if (header_.size() < kBlock) break;
      Status s = mode_ == Mode::kHeader ? OnHeader() : OnSparseExtension();
      header_.clear();
      if (!s.ok()) return s;
      continue;
    }
    size_t n = std::min<uint64_t>(remaining_, bytes.size());
    std::string_view piece = bytes.substr(0, n);
    bytes.remove_prefix(n);
    remaining_ -= n;
    if (mode_ == Mode::kFile) {
      if (Status s = FileData(piece); !s.ok()) return s;
    } else if (mode_ == Mode::kLongName || mode_ == Mode::kPax) {
      if (meta_.size() + piece.size() > (1u << 20)) return Status::Error("tar record too long");
      meta_.append(piece);
    }
    if (remaining_ > 0) continue;
    if (mode_ == Mode::kFile) {
      if (Status s = FileEnd(); !s.ok()) return s;
    } else if (mode_ == Mode::kLongName) {
      next_path_ = CString(meta_.data(), meta_.size());
    } else if (mode_ == Mode::kPax) {
      // "<len> key=value\n" records; only path matters here.
      size_t i = 0;
      while (i < meta_.size()) {
        size_t space = meta_.find(' ', i);
        if (space == std::string::npos) break;
        size_t len = std::strtoull(meta_.c_str() + i, nullptr, 10);
        if (len == 0 || i + len > meta_.size()) break;
        std::string_view rec(meta_.data() + space + 1, i + len - space - 2);
        if (rec.rfind("path=", 0) == 0) next_path_ = std::string(rec.substr(5));
        i += len;
      }
    }
    mode_ = Mode::kHeader;
  }
  return Status();
}

Status TarReader::OnHeader() {
  if (header_.find_first_not_of('\0') == std::string::npos) {
    finished_ = true;  // the first zero block ends the archive for our purposes
    return Status();
  }
  unsigned sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(header_[i]);
  }
  if (sum != ParseOctal(std::string_view(header_).substr(148, 8))) {
    return Status::Error("tar header checksum mismatch");
  }
  uint64_t size = ParseOctal(std::string_view(header_).substr(124, 12));
  char type = header_[156];
  std::string path = std::move(next_path_);
  next_path_.clear();
  if (path.empty()) {
    path = CString(&header_[0], 100);
    if (header_.compare(257, 5, "ustar") == 0 && header_[345] != '\0') {
      path = CString(&header_[345], 155) + "/" + path;
    }
  }
  remaining_ = size;
  meta_.clear();
  if (type == 'L' || type == 'x') {
    mode_ = type == 'L' ? Mode::kLongName : Mode::kPax;
  } else if (type == '0' || type == '\0' || type == '7') {
    auto norm = Normalise(path);
    if (!norm.ok()) return norm.status();
    if (!cb_.begin(*norm, size)) {
      stopped_ = true;
      return Status();
    }
    mode_ = Mode::kFile;
  } else if (type == 'S') {
    auto norm = Normalise(path);
    if (!norm.ok()) return norm.status();
    sparse_path_ = std::move(norm).value();
    real_size_ = ParseOctal(std::string_view(header_).substr(483, 12));
    stored_size_ = size;
    pieces_.clear();
    if (Status s = AddSparseEntries(386, 4); !s.ok()) return s;
    remaining_ = 0;
    padding_ = 0;
    if (header_[482] != '\0') {  // more of the map follows in blocks of its own
      mode_ = Mode::kSparseMap;
      return Status();
    }
    return StartSparseData();
  } else if (type == '1' || type == '2' || type == '3' || type == '4' || type == '6') {
    remaining_ = 0;  // links and devices carry no data
    mode_ = Mode::kSkip;
  } else {
    mode_ = Mode::kSkip;  // directories ('5' has size 0), 'g' globals, anything else
  }
  padding_ = Pad(remaining_);  // skipped once the data is consumed and headers resume
  if (remaining_ == 0) {
    if (mode_ == Mode::kFile) {
      if (Status s = FileEnd(); !s.ok()) return s;
    }
    mode_ = Mode::kHeader;
  }
  return Status();
}

Status TarReader::AddSparseEntries(size_t at, size_t count) {
  for (size_t k = 0; k < count; ++k) {
    const size_t entry = at + 24 * k;
    if (header_[entry] == '\0') break;  // unused entries are all NUL
    if (pieces_.size() >= kMaxSparsePieces) return Status::Error("tar sparse map too long");
    pieces_.push_back({ParseOctal(std::string_view(header_).substr(entry, 12)),
                       ParseOctal(std::string_view(header_).substr(entry + 12, 12))});
  }
  return Status();
}

Status TarReader::OnSparseExtension() {
  // 21 entries of 24 bytes, then the flag saying whether another such block follows.
  if (Status s = AddSparseEntries(0, 21); !s.ok()) return s;
  if (header_[504] != '\0') return Status();
  return StartSparseData();
}

Status TarReader::StartSparseData() {
  // The pieces must be in order, inside the file, and add up to the data in the archive: the
  // data is then placed exactly, and nothing reads past the member.
  uint64_t end = 0, sum = 0;
  for (const Piece& p : pieces_) {
    if (p.offset < end || p.length > real_size_ || p.offset > real_size_ - p.length) {
      return Status::Error("malformed tar sparse map for " + sparse_path_);
    }
    end = p.offset + p.length;
    sum += p.length;
  }
  if (sum != stored_size_) return Status::Error("malformed tar sparse map for " + sparse_path_);
  sparse_ = true;
  piece_ = 0;
  logical_ = 0;
  if (!cb_.begin(sparse_path_, real_size_)) {
    sparse_ = false;
    stopped_ = true;
    return Status();
  }
  mode_ = Mode::kFile;
  remaining_ = stored_size_;
  padding_ = Pad(stored_size_);
  if (remaining_ == 0) {
    mode_ = Mode::kHeader;
    return FileEnd();
  }
  return Status();
}

Status TarReader::FileData(std::string_view piece) {
  if (!sparse_) return cb_.data(piece);
  while (!piece.empty()) {
    if (piece_ >= pieces_.size()) return Status::Error("tar sparse data beyond its map");
    const Piece& p = pieces_[piece_];
    if (logical_ < p.offset) {
      if (Status s = Hole(p.offset - logical_); !s.ok()) return s;
      logical_ = p.offset;
    }
    const uint64_t left = p.offset + p.length - logical_;
    if (left == 0) {
      ++piece_;
      continue;
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, piece.size()));
    if (Status s = cb_.data(piece.substr(0, n)); !s.ok()) return s;
    logical_ += n;
    piece.remove_prefix(n);
  }
  return Status();
}

Status TarReader::FileEnd() {
  if (sparse_) {
    sparse_ = false;
    pieces_.clear();
    if (logical_ < real_size_) {
      if (Status s = Hole(real_size_ - logical_); !s.ok()) return s;
    }
  }
  return cb_.end();
}

Status TarReader::Hole(uint64_t n) {
  if (cb_.hole) return cb_.hole(n);
  static const std::string kZeros(64 * 1024, '\0');
  while (n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, kZeros.size()));
    if (Status s = cb_.data(std::string_view(kZeros).substr(0, k)); !s.ok()) return s;
    n -= k;
  }
  return Status();
}

}  // namespace ci::container
