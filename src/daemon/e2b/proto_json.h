// Reading proto3 JSON messages (envd's requests) field by field: a field that is absent or null
// keeps its default; one of the wrong type is an error naming it.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace ci::daemon::e2b {

// A member that is there and not null.
const rapidjson::Value* Member(const rapidjson::Value& v, const char* name);
// `where.name` into `out` when it is there.
Status StringField(const rapidjson::Value& v, const char* name, const char* where,
                   std::string* out);
Status BoolField(const rapidjson::Value& v, const char* name, const char* where, bool* out);
// uint32 in proto3 JSON: a number, or a decimal string.
Result<uint32_t> Uint32Field(const rapidjson::Value& v, const char* where);

}  // namespace ci::daemon::e2b
