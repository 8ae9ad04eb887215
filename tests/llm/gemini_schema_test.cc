// GeminiSchema: OpenAI's JSON Schema in Gemini's form.
#include "llm/gemini_schema.h"

#include <gtest/gtest.h>

#include "same_json.h"

namespace ci::llm {
namespace {

using test_support::SameJson;

TEST(GeminiSchema, UppercasesTypesRecursively) {
  EXPECT_TRUE(SameJson(GeminiSchema(R"({
    "type": "object",
    "properties": {
      "code": {"type": "string", "description": "The program."},
      "language": {"type": "string", "enum": ["python", "bash"]},
      "timeout_ms": {"type": "integer", "minimum": 1},
      "ratio": {"type": "number"},
      "verbose": {"type": "boolean"},
      "files": {"type": "array", "items": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "sizes": {"type": "array",
                                                             "items": {"type": "integer"}}}}}
    },
    "required": ["code"]
  })"),
                       R"({
    "type": "OBJECT",
    "properties": {
      "code": {"type": "STRING", "description": "The program."},
      "language": {"type": "STRING", "enum": ["python", "bash"]},
      "timeout_ms": {"type": "INTEGER", "minimum": 1},
      "ratio": {"type": "NUMBER"},
      "verbose": {"type": "BOOLEAN"},
      "files": {"type": "ARRAY", "items": {
        "type": "OBJECT",
        "properties": {"name": {"type": "STRING"}, "sizes": {"type": "ARRAY",
                                                             "items": {"type": "INTEGER"}}}}}
    },
    "required": ["code"]
  })"));
}

TEST(GeminiSchema, PropertyNamesAreNotKeywords) {
  // A property may be called "type" or "additionalProperties": only schema keywords change.
  EXPECT_TRUE(SameJson(GeminiSchema(R"({"type": "object", "properties": {"type": {"type": "string"},
                       "additionalProperties": {"type": "integer"}}})"),
                       R"({"type": "OBJECT", "properties": {"type": {"type": "STRING"},
          "additionalProperties": {"type": "INTEGER"}}})"));
}

TEST(GeminiSchema, NullableTypesAnyOfAndUnknownKeywords) {
  EXPECT_TRUE(SameJson(GeminiSchema(R"({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": false,
    "properties": {
      "stdin": {"type": ["string", "null"]},
      "value": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    }
  })"),
                       R"({
    "type": "OBJECT",
    "properties": {
      "stdin": {"type": "STRING", "nullable": true},
      "value": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}
    }
  })"));
}

TEST(GeminiSchema, NotAnObjectGivesAnEmptyObjectSchema) {
  EXPECT_EQ(GeminiSchema(""), R"({"type":"OBJECT"})");
  EXPECT_EQ(GeminiSchema("[1]"), R"({"type":"OBJECT"})");
  EXPECT_EQ(GeminiSchema("{"), R"({"type":"OBJECT"})");
}

}  // namespace
}  // namespace ci::llm
