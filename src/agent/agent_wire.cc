#include "agent/agent_wire.h"

namespace ci::agent {
namespace {

// Above the kernel's bound on one exec's argv and environment together (ARG_MAX is a quarter of
// the 8 MiB stack limit), so any command that could run fits.
constexpr uint32_t kMaxFrame = 8u << 20;
constexpr size_t kHeader = 5;

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

void PutStrings(std::string& out, const std::vector<std::string>& list) {
  PutU32(out, static_cast<uint32_t>(list.size()));
  for (const auto& s : list) {
    out.append(s);
    out.push_back('\0');
  }
}

// Reads one NUL-terminated string off the front of `in`.
bool TakeString(std::string_view& in, std::string* s) {
  size_t nul = in.find('\0');
  if (nul == std::string_view::npos) return false;
  s->assign(in.substr(0, nul));
  in.remove_prefix(nul + 1);
  return true;
}

bool TakeU32(std::string_view& in, uint32_t* v) {
  if (in.size() < 4) return false;
  *v = GetU32(in);
  in.remove_prefix(4);
  return true;
}

bool TakeStrings(std::string_view& in, std::vector<std::string>* list) {
  uint32_t n = 0;
  if (!TakeU32(in, &n) || n > in.size()) return false;  // each string takes a byte at least
  list->resize(n);
  for (auto& s : *list) {
    if (!TakeString(in, &s)) return false;
  }
  return true;
}

}  // namespace

std::string EncodeExec(const ExecRequest& r) {
  std::string out;
  PutU32(out, r.id);
  out.push_back(static_cast<char>((r.attach_stdin ? 1 : 0) | (r.from_zygote ? 2 : 0)));
  out.append(r.cwd);
  out.push_back('\0');
  PutStrings(out, r.argv);
  PutStrings(out, r.env);
  return out;
}

std::optional<ExecRequest> DecodeExec(std::string_view in) {
  ExecRequest r;
  if (!TakeU32(in, &r.id) || in.empty()) return std::nullopt;
  r.attach_stdin = (in[0] & 1) != 0;
  r.from_zygote = (in[0] & 2) != 0;
  in.remove_prefix(1);
  if (!TakeString(in, &r.cwd) || !TakeStrings(in, &r.argv) || !TakeStrings(in, &r.env) ||
      !in.empty() || r.argv.empty()) {
    return std::nullopt;
  }
  return r;
}

std::string EncodeWriteFiles(const WriteFilesRequest& r) {
  std::string out;
  PutU32(out, r.id);
  out.append(r.dir);
  out.push_back('\0');
  PutU32(out, static_cast<uint32_t>(r.files.size()));
  for (const auto& [name, content] : r.files) {
    out.append(name);
    out.push_back('\0');
    PutU32(out, static_cast<uint32_t>(content.size()));
    out.append(content);
  }
  return out;
}

std::optional<WriteFilesRequest> DecodeWriteFiles(std::string_view in) {
  WriteFilesRequest r;
  uint32_t n = 0;
  if (!TakeU32(in, &r.id) || !TakeString(in, &r.dir) || !TakeU32(in, &n) || n > in.size()) {
    return std::nullopt;
  }
  r.files.resize(n);
  for (auto& [name, content] : r.files) {
    uint32_t size = 0;
    if (!TakeString(in, &name) || !TakeU32(in, &size) || size > in.size()) return std::nullopt;
    content.assign(in.substr(0, size));
    in.remove_prefix(size);
  }
  if (!in.empty()) return std::nullopt;
  return r;
}

std::string EncodeDirListed(const DirListing& l) {
  std::string out;
  PutU32(out, l.id);
  out.push_back(l.why.empty() ? 1 : 0);
  if (!l.why.empty()) return out + l.why;
  for (const DirEntry& e : l.entries) {
    out.push_back(static_cast<char>(e.type));
    out.append(e.name);
    out.push_back('\0');
  }
  return out;
}

std::optional<DirListing> DecodeDirListed(std::string_view in) {
  DirListing l;
  if (!TakeU32(in, &l.id) || in.empty()) return std::nullopt;
  const bool ok = in[0] == 1;
  in.remove_prefix(1);
  if (!ok) {
    l.why = in.empty() ? "not listed" : std::string(in);
    return l;
  }
  while (!in.empty()) {
    DirEntry e;
    e.type = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    if (!TakeString(in, &e.name)) return std::nullopt;
    l.entries.push_back(std::move(e));
  }
  return l;
}

std::string WithId(uint32_t id, std::string_view rest) {
  std::string out;
  out.reserve(4 + rest.size());
  PutU32(out, id);
  out.append(rest);
  return out;
}

std::string EncodeOutput(uint32_t id, int stream, std::string_view bytes) {
  std::string out;
  out.reserve(5 + bytes.size());
  PutU32(out, id);
  out.push_back(static_cast<char>(stream));
  out.append(bytes);
  return out;
}

std::string EncodeExited(uint32_t id, int32_t status) {
  std::string out;
  PutU32(out, id);
  PutU32(out, static_cast<uint32_t>(status));
  return out;
}

std::optional<std::pair<uint32_t, std::string_view>> SplitId(std::string_view payload) {
  uint32_t id = 0;
  if (!TakeU32(payload, &id)) return std::nullopt;
  return std::make_pair(id, payload);
}

std::optional<Output> DecodeOutput(std::string_view payload) {
  auto split = SplitId(payload);
  if (!split || split->second.empty()) return std::nullopt;
  int stream = static_cast<unsigned char>(split->second[0]);
  if (stream != 1 && stream != 2) return std::nullopt;
  return Output{split->first, stream, split->second.substr(1)};
}

std::optional<std::pair<uint32_t, int32_t>> DecodeExited(std::string_view payload) {
  if (payload.size() != 8) return std::nullopt;
  return std::make_pair(GetU32(payload), static_cast<int32_t>(GetU32(payload.substr(4))));
}

std::string EncodeAck(uint32_t conn, uint32_t count) {
  std::string out;
  PutU32(out, conn);
  PutU32(out, count);
  return out;
}

std::optional<std::pair<uint32_t, uint32_t>> DecodeAck(std::string_view payload) {
  if (payload.size() != 8) return std::nullopt;
  return std::make_pair(GetU32(payload), GetU32(payload.substr(4)));
}

std::string Frame(Msg type, std::string_view payload) {
  std::string out;
  out.reserve(kHeader + payload.size());
  out.push_back(static_cast<char>(type));
  PutU32(out, static_cast<uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

bool FrameReader::Next(Msg* type, std::string* payload, bool* bad) {
  *bad = false;
  std::string_view avail = std::string_view(buf_).substr(pos_);
  if (avail.size() < kHeader) return false;
  uint32_t length = GetU32(avail.substr(1));
  if (length > kMaxFrame) {
    *bad = true;
    return false;
  }
  if (avail.size() < kHeader + length) return false;
  *type = static_cast<Msg>(static_cast<unsigned char>(avail[0]));
  payload->assign(avail.substr(kHeader, length));
  pos_ += kHeader + length;
  // Compact once the consumed prefix dominates, so the buffer stays the size of what is pending.
  if (pos_ > 4096 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return true;
}

}  // namespace ci::agent
