// Compares JSON texts as values (member order and whitespace do not matter).
#pragma once

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

#include "core/json.h"

namespace ci::llm::test_support {

inline ::testing::AssertionResult SameJson(const std::string& actual, const std::string& expected) {
  rapidjson::Document a, e;
  std::string why;
  if (!ParseJson(actual, a, why)) return ::testing::AssertionFailure() << "actual: " << why;
  if (!ParseJson(expected, e, why)) return ::testing::AssertionFailure() << "expected: " << why;
  if (a == e) return ::testing::AssertionSuccess();
  rapidjson::Document canonical;
  canonical.Parse(expected.c_str());
  return ::testing::AssertionFailure()
         << "\n  actual:   " << actual
         << "\n  expected: " << JsonText([&](JsonWriter& w) { canonical.Accept(w); });
}

}  // namespace ci::llm::test_support
