#include "runtime/init/embedded_python.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// Run in the zygote: the warm imports with stdout and stderr going nowhere and the working
// directory /, then the environment put back as it was (an import may change os.environ; nothing
// runs here after this), and the sources compiled ahead (one that does not compile is left to the
// program, which then reports it).
std::string WarmUpSource(const std::vector<std::string>& modules,
                         const std::vector<std::string>& sources) {
  return "def _ci_warm(modules, sources):\n"
         "    import os, sys\n"
         "    env = dict(os.environ)\n"
         "    saved = os.dup(1), os.dup(2)\n"
         "    null = os.open(os.devnull, os.O_WRONLY)\n"
         "    os.dup2(null, 1)\n"
         "    os.dup2(null, 2)\n"
         "    for name in modules:\n"
         "        try:\n"
         "            __import__(name)\n"
         "        except BaseException:\n"
         "            pass\n"
         "    sys.stdout.flush()\n"
         "    sys.stderr.flush()\n"
         "    os.dup2(saved[0], 1)\n"
         "    os.dup2(saved[1], 2)\n"
         "    for fd in (null,) + saved:\n"
         "        os.close(fd)\n"
         "    if dict(os.environ) != env:\n"
         "        os.environ.clear()\n"
         "        os.environ.update(env)\n"
         "    sys._ci_compiled = {}\n"
         "    for source in sources:\n"
         "        try:\n"
         "            sys._ci_compiled[source] = compile(source, '<string>', 'exec')\n"
         "        except BaseException:\n"
         "            pass\n"
         "    import atexit, gc, io, signal  # what every program's start and end use\n"
         "    gc.collect()  # the imports' garbage: not copied into every fork\n"
         "    gc.freeze()  # the programs' collections skip (and do not copy) what is here\n"
         "_ci_warm(" +
         PyList(modules) + ", " + PyList(sources) + ")\ndel _ci_warm\n";
}

// Each program, forked: defined (compiled) once in the zygote as sys._ci_program, called once in
// the program's process, where it never returns. First what `python3 -c` has at its start and a
// fork does not give: the source (passed as sys.argv's last item) and sys.orig_argv, signal
// dispositions, sys.path[0], fresh random state. Then it runs the source (its code object when
// the zygote compiled it ahead) in __main__ and ends the process the way `python3 -c` does: exit
// status from SystemExit (its message on stderr when not a number), a traceback and 1 for any other
// exception (KeyboardInterrupt: killed by SIGINT), non-daemon threads waited for, atexit handlers
// run, and 120 when stdout cannot be flushed. Instead of the interpreter's whole teardown (~70 ms
// with pandas loaded, copying most of the zygote's pages), every file the program left open is
// flushed (texts before their buffers: a collection alone finalizes a cycle's objects in any order
// and can lose what a file held), what it made is dropped (__main__'s names, then a collection, so
// __del__ methods run), and the process exits at once.
constexpr const char* kProgramSource =
    "def _ci_program():\n"
    "    import atexit, gc, io, os, signal, sys\n"
    "    source = sys.argv.pop()\n"
    "    sys.orig_argv[:] = ['python3', '-c', source] + sys.argv[1:]\n"
    "    signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "    signal.signal(signal.SIGPIPE, signal.SIG_IGN)\n"
    "    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "    code = sys.__dict__.pop('_ci_compiled').get(source)\n"
    "    sys.path.insert(0, '')\n"
    "    numpy_random = sys.modules.get('numpy.random')\n"
    "    if numpy_random is not None:\n"
    "        numpy_random.seed()  # a fork shares the zygote's global state: reseed\n"
    "    main = sys.modules['__main__'].__dict__\n"
    "    interrupted = False\n"
    "    try:\n"
    "        if code is None:\n"
    "            code = compile(source, '<string>', 'exec')\n"
    "        exec(code, main)\n"
    "        status = 0\n"
    "    except SystemExit as e:\n"
    "        status = e.code\n"
    "        if status is None:\n"
    "            status = 0\n"
    "        elif not isinstance(status, int):\n"
    "            print(status, file=sys.stderr)\n"
    "            status = 1\n"
    "    except BaseException as e:\n"
    "        tb = e.__traceback__.tb_next  # from the program's first frame on\n"
    "        sys.excepthook(type(e), e.with_traceback(tb), tb)\n"
    "        status = 1\n"
    "        interrupted = isinstance(e, KeyboardInterrupt)\n"
    "    del source, code\n"
    "    threading = sys.modules.get('threading')\n"
    "    if threading is not None:\n"
    "        threading._shutdown()\n"
    "    atexit._run_exitfuncs()\n"
    "    files = [o for o in gc.get_objects() if isinstance(o, io.IOBase)]\n"
    "    for text_first in (True, False):\n"
    "        for f in files:\n"
    "            if isinstance(f, io.TextIOBase) == text_first:\n"
    "                try:\n"
    "                    f.flush()\n"
    "                except Exception:\n"
    "                    pass\n"
    "    del files\n"
    "    main.clear()\n"
    "    gc.collect()\n"
    "    for stream in (sys.stdout, sys.stderr):\n"
    "        try:\n"
    "            stream.flush()\n"
    "        except Exception:\n"
    "            status = status or 120\n"
    "    if interrupted:\n"
    "        signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "        os.kill(os.getpid(), signal.SIGINT)\n"
    "    os._exit(status & 0xff)\n"
    "__import__('sys')._ci_program = _ci_program\n"
    "del _ci_program\n";

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
      loaded.run_simple_string(kProgramSource) != 0) {
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
