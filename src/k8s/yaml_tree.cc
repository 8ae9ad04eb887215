#include "k8s/yaml_tree.h"

#include <yaml.h>

#include <memory>

namespace ci::k8s {
namespace {

// A kubeconfig has tens of nodes; these bounds only stop hostile aliasing and nesting.
constexpr size_t kMaxNodes = 100000;
constexpr int kMaxDepth = 64;

bool IsPlainNull(const yaml_node_t& n) {
  if (n.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
  std::string_view v(reinterpret_cast<const char*>(n.data.scalar.value), n.data.scalar.length);
  return v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL";
}

class TreeBuilder {
 public:
  explicit TreeBuilder(yaml_document_t* doc) : doc_(doc) {}

  Result<YamlNode> Build(yaml_node_t* n, int depth) {
    if (++count_ > kMaxNodes) return Status::Error("more than 100000 nodes (aliases expanded)");
    if (depth > kMaxDepth) return Status::Error("nested deeper than 64 levels");
    YamlNode out;
    out.line = static_cast<int>(n->start_mark.line) + 1;
    switch (n->type) {
      case YAML_SCALAR_NODE:
        if (!IsPlainNull(*n)) {
          out.kind = YamlNode::Kind::kScalar;
          out.scalar.assign(reinterpret_cast<const char*>(n->data.scalar.value),
                            n->data.scalar.length);
        }
        return out;
      case YAML_SEQUENCE_NODE:
        out.kind = YamlNode::Kind::kSequence;
        for (auto* i = n->data.sequence.items.start; i < n->data.sequence.items.top; ++i) {
          auto item = Build(yaml_document_get_node(doc_, *i), depth + 1);
          if (!item.ok()) return item.status();
          out.items.push_back(std::move(item).value());
        }
        return out;
      case YAML_MAPPING_NODE:
        out.kind = YamlNode::Kind::kMapping;
        for (auto* p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; ++p) {
          auto key = Build(yaml_document_get_node(doc_, p->key), depth + 1);
          if (!key.ok()) return key.status();
          if (key->kind != YamlNode::Kind::kScalar) {
            return Status::Error("line " + std::to_string(key->line) +
                                 ": a mapping key that is not a string");
          }
          auto value = Build(yaml_document_get_node(doc_, p->value), depth + 1);
          if (!value.ok()) return value.status();
          value->line = key->line;  // "exec (line 5)" points at the key, not the block below it
          value->key = std::move(key->scalar);
          out.items.push_back(std::move(value).value());
        }
        return out;
      case YAML_NO_NODE:
        return out;
    }
    return out;
  }

 private:
  yaml_document_t* doc_;
  size_t count_ = 0;
};

}  // namespace

const YamlNode* YamlNode::Find(std::string_view name) const {
  if (kind != Kind::kMapping) return nullptr;
  for (const YamlNode& v : items) {
    if (v.key == name) return v.kind == Kind::kNull ? nullptr : &v;
  }
  return nullptr;
}

Result<YamlNode> ParseYaml(std::string_view text) {
  yaml_parser_t parser;
  if (yaml_parser_initialize(&parser) == 0) return Status::Error("cannot start the YAML parser");
  std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> parser_guard(&parser,
                                                                        yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  yaml_document_t doc;
  if (yaml_parser_load(&parser, &doc) == 0) {
    std::string where = "line " + std::to_string(parser.problem_mark.line + 1);
    std::string problem = parser.problem != nullptr ? parser.problem : "invalid YAML";
    if (parser.context != nullptr) problem = std::string(parser.context) + ": " + problem;
    return Status::Error(where + ": " + problem);
  }
  std::unique_ptr<yaml_document_t, void (*)(yaml_document_t*)> doc_guard(&doc,
                                                                         yaml_document_delete);
  yaml_node_t* root = yaml_document_get_root_node(&doc);
  if (root == nullptr) return YamlNode();
  return TreeBuilder(&doc).Build(root, 0);
}

}  // namespace ci::k8s
