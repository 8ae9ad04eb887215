#include "daemon/tools/program_extraction.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

namespace ci::daemon {
namespace {

struct Block {
  std::string info;  // lowercased first word after the fence
  std::string body;
};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A fence line: optional indentation, then at least three ` or ~. Returns the fence.
std::optional<std::string_view> FenceOf(std::string_view line) {
  std::string_view t = TrimSpaces(line);
  if (t.size() < 3 || (t[0] != '`' && t[0] != '~')) return std::nullopt;
  size_t n = t.find_first_not_of(t[0]);
  if (n == std::string_view::npos) n = t.size();
  if (n < 3) return std::nullopt;
  return t.substr(0, n);
}

std::vector<Block> FencedBlocks(std::string_view text) {
  std::vector<Block> blocks;
  std::optional<std::string> open;  // the fence of the block being read
  Block current;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    std::optional<std::string_view> fence = FenceOf(line);
    if (!open) {
      if (!fence) continue;
      open = std::string(*fence);
      std::string_view rest = TrimSpaces(TrimSpaces(line).substr(fence->size()));
      current = Block{Lower(rest.substr(0, rest.find_first_of(" \t{"))), ""};
    } else if (fence && fence->starts_with(*open) && TrimSpaces(line).size() == fence->size()) {
      blocks.push_back(std::move(current));
      open.reset();
    } else {
      current.body.append(line).push_back('\n');
    }
  }
  if (open) blocks.push_back(std::move(current));  // cut off: the code so far
  return blocks;
}

bool Names(std::string_view info, std::string_view language) {
  static constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
      {"py", "python"},  {"python3", "python"}, {"golang", "go"},       {"sh", "bash"},
      {"shell", "bash"}, {"js", "javascript"},  {"node", "javascript"}, {"zsh", "bash"},
  };
  if (info == language) return true;
  for (auto [alias, name] : kAliases) {
    if (info == alias && name == language) return true;
  }
  return false;
}

// Without the blank lines around it and without trailing whitespace.
std::string TrimBlankLines(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n') {
      start = i + 1;
    } else if (!std::isspace(static_cast<unsigned char>(s[i]))) {
      break;
    }
  }
  return std::string(s.substr(std::min(start, s.size())));
}

}  // namespace

std::string ExtractProgram(std::string_view answer, std::string_view language) {
  std::vector<Block> blocks = FencedBlocks(answer);
  if (blocks.empty()) return TrimBlankLines(answer);
  for (const Block& b : blocks) {
    if (Names(b.info, language)) return TrimBlankLines(b.body);
  }
  return TrimBlankLines(blocks.front().body);
}

}  // namespace ci::daemon
