// A YAML document as a small tree of mappings, sequences and scalars: what reading a kubeconfig
// needs, with each node's line so an error can say where. libyaml parses; this keeps none of its
// types in the interface.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::k8s {

struct YamlNode {
  enum class Kind { kNull, kScalar, kSequence, kMapping };
  Kind kind = Kind::kNull;
  std::string scalar;           // kScalar: the text, unquoted
  std::vector<YamlNode> items;  // kSequence: the items; kMapping: the values, in document order
  std::string key;              // a mapping's value: its key
  int line = 0;                 // 1-based, 0 for none; a mapping's value has its key's line

  // The value of `name` in a mapping; nullptr when absent, null, or this is not a mapping.
  const YamlNode* Find(std::string_view name) const;
};

// The first document of `text` (YAML 1.1, so JSON too). An empty stream is a null node; a plain
// `null`, `~` or nothing is null; every other scalar is its text (types are the reader's
// business). Aliases are expanded, within a node budget so a "billion laughs" file fails instead
// of exhausting memory.
Result<YamlNode> ParseYaml(std::string_view text);

}  // namespace ci::k8s
