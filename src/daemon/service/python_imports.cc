#include "daemon/service/python_imports.h"

#include <array>
#include <set>

#include "daemon/service/service_programs.h"

namespace ci::daemon {
namespace {

bool IsNameStart(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_' || u >= 0x80;
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

// Past the string literal whose quote is at `i` (a line ends an unterminated short one).
size_t SkipString(std::string_view code, size_t i) {
  const std::string triple(3, code[i]);
  const bool is_triple = code.substr(i, 3) == triple;
  size_t j = i + (is_triple ? 3 : 1);
  while (j < code.size()) {
    if (code[j] == '\\') {
      j += 2;
    } else if (is_triple ? code.substr(j, 3) == triple : code[j] == code[i]) {
      return j + (is_triple ? 3 : 1);
    } else if (!is_triple && code[j] == '\n') {
      return j;
    } else {
      ++j;
    }
  }
  return code.size();
}

// Names, statement ends (a newline outside brackets, or ';': "\n") and other characters of
// `code`, without strings, comments and line continuations: enough for import statements.
std::vector<std::string_view> Tokens(std::string_view code) {
  std::vector<std::string_view> out;
  int depth = 0;  // inside (), [] and {} a newline does not end the statement
  size_t i = 0;
  while (i < code.size()) {
    const char c = code[i];
    if (c == '#') {
      while (i < code.size() && code[i] != '\n') ++i;
    } else if (c == '\\' && i + 1 < code.size() && code[i + 1] == '\n') {
      i += 2;
    } else if (c == '\'' || c == '"') {
      i = SkipString(code, i);
    } else if (IsNameStart(c)) {
      const size_t start = i;
      while (i < code.size() && IsNameChar(code[i])) ++i;
      const std::string_view name = code.substr(start, i - start);
      const bool prefix = name.size() <= 2 && name.find_first_not_of("rRbBuUfF") == name.npos;
      if (prefix && i < code.size() && (code[i] == '\'' || code[i] == '"')) {
        i = SkipString(code, i);
      } else {
        out.push_back(name);
      }
    } else {
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      if ((c == '\n' && depth == 0) || c == ';') {
        out.push_back("\n");
      } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\f') {
        out.push_back(code.substr(i, 1));
      }
      ++i;
    }
  }
  return out;
}

bool IsName(std::string_view token) { return !token.empty() && IsNameStart(token[0]); }

// Whether `word` occurs in `text` as a whole name.
bool MentionsName(std::string_view text, std::string_view word) {
  for (size_t at = text.find(word); at != text.npos; at = text.find(word, at + 1)) {
    const size_t end = at + word.size();
    if ((at == 0 || !IsNameChar(text[at - 1])) && (end == text.size() || !IsNameChar(text[end]))) {
      return true;
    }
  }
  return false;
}

const std::set<std::string, std::less<>>& StandardLibrary() {
  static const auto* names = [] {
    auto* set = new std::set<std::string, std::less<>>;
    const std::string_view text = programs::kPythonStdlibModules;
    for (size_t start = 0; start < text.size();) {
      size_t end = text.find('\n', start);
      if (end == text.npos) end = text.size();
      const std::string_view line = text.substr(start, end - start);
      if (!line.empty() && line[0] != '#') set->emplace(line);
      start = end + 1;
    }
    return set;
  }();
  return *names;
}

}  // namespace

std::vector<std::string> ImportedModules(std::string_view code) {
  const std::vector<std::string_view> t = Tokens(code);
  auto at = [&](size_t k, std::string_view s) { return k < t.size() && t[k] == s; };
  auto name_at = [&](size_t k) { return k < t.size() && IsName(t[k]) && t[k] != "import"; };
  std::vector<std::string> out;
  for (size_t k = 0; k < t.size(); ++k) {
    if (t[k] == "from") {  // `from [.]a.b import c`; not `yield from x` or `raise E from e`
      size_t j = k + 1;
      const bool relative = at(j, ".");
      while (at(j, ".")) ++j;
      std::string_view first;
      if (name_at(j)) {
        first = t[j++];
        while (at(j, ".") && name_at(j + 1)) j += 2;
      }
      if (!at(j, "import") || (!relative && first.empty())) continue;
      out.emplace_back(relative ? "." : first);
      while (k + 1 < t.size() && t[k + 1] != "\n") ++k;  // the names imported from it
    } else if (t[k] == "import") {                       // `import a.b as c, d`
      size_t j = k + 1;
      while (name_at(j)) {
        out.emplace_back(t[j++]);
        while (at(j, ".") && name_at(j + 1)) j += 2;
        if (at(j, "as") && name_at(j + 1)) j += 2;
        if (!at(j, ",")) break;
        ++j;
      }
      k = j - 1;
    }
  }
  return out;
}

bool MayImportWarmModules(std::string_view code, const std::vector<std::string>& warm) {
  static constexpr std::array<std::string_view, 12> kOtherWays = {
      "__import__", "importlib", "import_module", "exec",    "eval",     "runpy",
      "pickle",     "_pickle",   "shelve",        "pkgutil", "builtins", "__builtins__"};
  for (std::string_view way : kOtherWays) {
    if (MentionsName(code, way)) return true;
  }
  std::set<std::string_view> warm_top;
  for (const std::string& module : warm)
    warm_top.insert(std::string_view(module).substr(0, module.find('.')));
  for (const std::string& module : ImportedModules(code)) {
    if (module == "." || warm_top.count(module) != 0 || StandardLibrary().count(module) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace ci::daemon
