// OpenAI's JSON Schema for a function's parameters, as Gemini's functionDeclarations take it: the
// OpenAPI subset of Gemini's Schema object, with uppercase type names. Used by the Gemini
// provider and by GET /v1/tools?format=gemini.
#pragma once

#include <string>
#include <string_view>

namespace ci::llm {

// {"type": "object", "properties": {"n": {"type": "integer"}}} ->
// {"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}}, recursively through properties,
// items and anyOf. A type list with "null" (["string", "null"]) becomes the type and
// "nullable": true. Keywords Gemini's Schema does not have (additionalProperties, $schema, ...)
// are dropped: Gemini answers 400 for an unknown field. Text that is not a JSON object gives
// {"type":"OBJECT"} (always valid JSON, so callers may embed it raw).
std::string GeminiSchema(std::string_view openai_json_schema);

}  // namespace ci::llm
