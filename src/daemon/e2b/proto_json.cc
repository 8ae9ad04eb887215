#include "daemon/e2b/proto_json.h"

namespace ci::daemon::e2b {

const rapidjson::Value* Member(const rapidjson::Value& v, const char* name) {
  auto it = v.FindMember(name);
  return it == v.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

Status StringField(const rapidjson::Value& v, const char* name, const char* where,
                   std::string* out) {
  const rapidjson::Value* m = Member(v, name);
  if (m == nullptr) return Status();
  if (!m->IsString()) return Status::Error(std::string(where) + "." + name + " must be a string");
  out->assign(m->GetString(), m->GetStringLength());
  return Status();
}

Result<uint32_t> Uint32Field(const rapidjson::Value& v, const char* where) {
  if (v.IsUint()) return v.GetUint();
  if (v.IsString() && v.GetStringLength() > 0 && v.GetStringLength() <= 10) {
    uint64_t n = 0;
    const std::string_view digits(v.GetString(), v.GetStringLength());
    for (char c : digits) n = c >= '0' && c <= '9' ? n * 10 + (c - '0') : ~uint64_t{0};
    if (n <= 0xffffffffULL) return static_cast<uint32_t>(n);
  }
  return Status::Error(std::string(where) + " must be an unsigned 32-bit number");
}

Status BoolField(const rapidjson::Value& v, const char* name, const char* where, bool* out) {
  const rapidjson::Value* m = Member(v, name);
  if (m == nullptr) return Status();
  if (!m->IsBool())
    return Status::Error(std::string(where) + "." + name + " must be true or false");
  *out = m->GetBool();
  return Status();
}

}  // namespace ci::daemon::e2b
