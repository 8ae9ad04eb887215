#include "runtime/init/embedded_python.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/fork_server_programs.h"

namespace ci::runtime {
namespace {

// The few entry points of the CPython C API used here, looked up in the loaded library.
struct PythonApi {
  void (*initialize_ex)(int) = nullptr;
  int (*run_simple_string)(const char*) = nullptr;
  void (*before_fork)() = nullptr;
  void (*after_fork_parent)() = nullptr;
  void (*after_fork_child)() = nullptr;
  wchar_t* (*decode_locale)(const char*, size_t*) = nullptr;
  void (*set_argv_ex)(int, wchar_t**, int) = nullptr;
};

PythonApi* api = nullptr;                        // set once the interpreter runs in this process
std::vector<std::string>* python_env = nullptr;  // its environment, as it was given

// What `python3` is on this host: /usr/bin/python3 -> python3.11 -> libpython3.11.so.1.0.
std::string LibraryName() {
  char target[64] = {};
  ssize_t n = ::readlink("/usr/bin/python3", target, sizeof target - 1);
  std::string name = n > 0 ? std::string(target, static_cast<size_t>(n)) : "python3";
  size_t slash = name.rfind('/');
  if (slash != std::string::npos) name.erase(0, slash + 1);
  return "lib" + name + ".so.1.0";
}

template <typename F>
bool Find(void* lib, const char* symbol, F* out) {
  *out = reinterpret_cast<F>(::dlsym(lib, symbol));
  return *out != nullptr;
}

// Quotes `s` as a Python bytes literal, decoded as UTF-8 with the file system's error handler.
std::string PyStr(const std::string& s) {
  std::string out = "b'";
  for (unsigned char c : s) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
  return out + "'.decode('utf-8', 'surrogateescape')";
}

std::string PyList(const std::vector<std::string>& items) {
  std::string list = "[";
  for (const auto& item : items) list += PyStr(item) + ",";
  return list + "]";
}

// Run in the zygote: warm_up.py's _ci_warm, called with the modules and the sources to compile
// ahead; then program_start.py defines what each forked program runs.
std::string WarmUpSource(const std::vector<std::string>& modules,
                         const std::vector<std::string>& sources) {
  return std::string(programs::kWarmUp) + "_ci_warm(" + PyList(modules) + ", " + PyList(sources) +
         ")\ndel _ci_warm\n";
}

}  // namespace

SysError LoadEmbeddedPython(const std::vector<std::string>& env,
                            const std::vector<std::string>& modules,
                            const std::vector<std::string>& sources) {
  const std::string name = LibraryName();
  void* lib = ::dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) return SysFailErr(ENOENT, "dlopen " + name + ": " + ::dlerror());
  static PythonApi loaded;
  if (!Find(lib, "Py_InitializeEx", &loaded.initialize_ex) ||
      !Find(lib, "PyRun_SimpleString", &loaded.run_simple_string) ||
      !Find(lib, "PyOS_BeforeFork", &loaded.before_fork) ||
      !Find(lib, "PyOS_AfterFork_Parent", &loaded.after_fork_parent) ||
      !Find(lib, "PyOS_AfterFork_Child", &loaded.after_fork_child) ||
      !Find(lib, "Py_DecodeLocale", &loaded.decode_locale) ||
      !Find(lib, "PySys_SetArgvEx", &loaded.set_argv_ex)) {
    return SysFailErr(ENOENT, name + " lacks a symbol of the C API: " + ::dlerror());
  }
  static std::vector<std::string> kept = env;  // putenv keeps pointers into it
  ::clearenv();
  for (auto& kv : kept) ::putenv(kv.data());
  loaded.initialize_ex(1);  // Python's signal handlers, as `python3` installs them
  if (loaded.run_simple_string(WarmUpSource(modules, sources).c_str()) != 0 ||
      loaded.run_simple_string(std::string(programs::kProgramStart).c_str()) != 0) {
    return SysFailErr(EINVAL, "the warm-up code failed");
  }
  // Free memory back to the kernel: the fewer pages mapped here, the fewer each fork copies (the
  // page tables) and each exit unmaps.
  ::malloc_trim(0);
  api = &loaded;
  python_env = &kept;
  return SysOk();
}

void BeforeEmbeddedPythonFork() {
  if (api != nullptr) api->before_fork();
}

void AfterEmbeddedPythonFork() {
  if (api != nullptr) api->after_fork_parent();
}

bool EmbeddedPythonRuns(char** argv, char** envp) {
  if (api == nullptr || argv[0] == nullptr || std::strcmp(argv[0], "python3") != 0 ||
      argv[1] == nullptr || std::strcmp(argv[1], "-c") != 0 || argv[2] == nullptr) {
    return false;
  }
  size_t n = 0;
  for (; envp[n] != nullptr; ++n) {
    if (n >= python_env->size() || (*python_env)[n] != envp[n]) return false;
  }
  return n == python_env->size();
}

void RunEmbeddedPython(char** argv) {
  // Its signals are a fresh process's already (ExecProgram). Its name is python3's.
  (void)::prctl(PR_SET_NAME, "python3", 0, 0, 0);
  api->after_fork_child();
  // sys.argv = ['-c', ARGS..., SOURCE]: _ci_program takes the source off (`python3 -c SOURCE
  // ARGS...` gives ['-c', ARGS...]).
  std::vector<wchar_t*> wargv;
  wargv.push_back(api->decode_locale("-c", nullptr));
  for (char** a = argv + 3; *a != nullptr; ++a) wargv.push_back(api->decode_locale(*a, nullptr));
  wargv.push_back(api->decode_locale(argv[2], nullptr));
  api->set_argv_ex(static_cast<int>(wargv.size()), wargv.data(), 0);
  api->run_simple_string("__import__('sys').__dict__.pop('_ci_program')()\n");
  ::_exit(126);  // it never returns
}

}  // namespace ci::runtime
