// The rich results a run's Python program wrote (rich_results.py) as the daemon takes them: out
// of the workspace files it collected, as MIME bundles with E2B's field names (docs/api.md "Rich
// results").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/executor.h"

namespace ci::daemon {

// The workspace file the programs write their results to, one JSON object per line.
inline constexpr std::string_view kResultsFile = ".ci-results.jsonl";

// At most this many results per run; later ones are dropped.
inline constexpr size_t kMaxResults = 100;

// Takes the results file out of `files` (its host copy is removed) and returns its results, each
// the text of a JSON object of the known fields (is_main_result, text, html, markdown, svg, png,
// jpeg, pdf, latex, json, javascript); lines that are not such objects are dropped.
std::vector<std::string> TakeResultBundles(std::vector<CollectedFile>& files);

}  // namespace ci::daemon
