// Golden JSON files for the pure translators' tests (docker ContainerCreate, k8s Pod): the output
// is compared with <dir>/<name>.json as JSON values; UPDATE_GOLDEN=1 rewrites the file
// (pretty-printed) from the current output, so a change shows as a reviewable diff.
#pragma once

#include <gtest/gtest.h>
#include <rapidjson/prettywriter.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/json.h"

namespace ci::testing_support {

inline void ExpectGolden(const std::string& dir, const std::string& name,
                         const std::string& actual) {
  std::string path = dir + "/" + name + ".json";
  rapidjson::Document got;
  std::string why;
  ASSERT_TRUE(ParseJson(actual, got, why)) << why;
  rapidjson::StringBuffer pretty;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> pw(pretty);
  pw.SetIndent(' ', 2);
  got.Accept(pw);
  if (std::getenv("UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << pretty.GetString() << "\n";
  }
  std::ifstream f(path);
  ASSERT_TRUE(f) << "missing golden file " << path << " (run with UPDATE_GOLDEN=1)";
  std::stringstream ss;
  ss << f.rdbuf();
  rapidjson::Document want;
  ASSERT_TRUE(ParseJson(ss.str(), want, why)) << path << ": " << why;
  EXPECT_TRUE(want == got) << "differs from " << path << "; got:\n" << pretty.GetString();
}

}  // namespace ci::testing_support
