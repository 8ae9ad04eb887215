// What the wire-format tests of both providers expect of a parsed answer.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "llm/conversation.h"

namespace ci::llm::test_support {

// The code tool's parameters, as the tests declare it.
inline constexpr char kCodeParameters[] =
    R"({"type":"object","properties":{"code":{"type":"string"}},"required":["code"]})";

inline Reply ExpectReply(const ModelResult& r) {
  if (const auto* e = std::get_if<ModelError>(&r)) {
    ADD_FAILURE() << "an error: " << e->message;
    return {};
  }
  return std::get<Reply>(r);
}

// A malformed-answer error (not an HTTP one).
inline ModelError ExpectMalformed(const ModelResult& r) {
  if (!std::holds_alternative<ModelError>(r)) {
    ADD_FAILURE() << "a reply, not an error";
    return {};
  }
  const ModelError& e = std::get<ModelError>(r);
  EXPECT_EQ(e.kind, ModelError::Kind::kMalformed) << e.message;
  EXPECT_EQ(e.http_status, 0);
  return e;
}

}  // namespace ci::llm::test_support
