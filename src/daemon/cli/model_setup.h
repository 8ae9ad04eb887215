// The agent loop's model, from the environment (llm_config.h), for `serve` and `ask`: the key
// is read once and then kept from everything else — its environment variable is zeroed in
// place and removed (so no child, dump or /proc/PID/environ of this process shows it), and a
// key file must not be where a local sandbox can read it.
#pragma once

#include <string>

#include "core/status.h"
#include "daemon/config/config.h"
#include "llm/llm_config.h"

namespace ci::daemon {

Result<llm::LlmConfig> LoadModelConfig(const Config& config);

// "openai model gpt-4o at https://api.openai.com/v1 (key from LLM_API_KEY_FILE)": for the log.
std::string DescribeModel(const llm::LlmConfig& model);

}  // namespace ci::daemon
