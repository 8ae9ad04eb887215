// Reading Kubernetes objects (a Pod, a PodList, a watch event's object) from their JSON: every
// field optional, since a watch may carry a partial status and servers omit empty fields.
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <vector>

namespace ci::k8s {

inline const rapidjson::Value* Member(const rapidjson::Value* v, const char* key) {
  if (v == nullptr || !v->IsObject()) return nullptr;
  auto it = v->FindMember(key);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

// The string field `key` of `v`; "" when absent or not a string.
inline std::string Str(const rapidjson::Value* v, const char* key) {
  const rapidjson::Value* m = Member(v, key);
  return m != nullptr && m->IsString() ? std::string(m->GetString(), m->GetStringLength()) : "";
}

// Members of an array field (none when absent or not an array).
inline std::vector<const rapidjson::Value*> Items(const rapidjson::Value* v, const char* key) {
  std::vector<const rapidjson::Value*> out;
  const rapidjson::Value* a = Member(v, key);
  if (a == nullptr || !a->IsArray()) return out;
  for (const rapidjson::Value& e : a->GetArray()) out.push_back(&e);
  return out;
}

// metadata.resourceVersion of an object ("" when absent).
inline std::string ResourceVersionOf(const rapidjson::Value& object) {
  return Str(Member(&object, "metadata"), "resourceVersion");
}

}  // namespace ci::k8s
