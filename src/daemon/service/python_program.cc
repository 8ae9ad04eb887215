#include "daemon/service/python_program.h"

namespace ci::daemon {
namespace {

// Python's program, pre-started or not (SandboxSpec::prestart_argv), or forked from the fork
// server: the interpreter is up and has imported the modules named in its argv (warm imports,
// quietly: nothing they print is the run's), says so on fd 3 where it was pre-started, and then
// reads the go line on stdin, byte by byte so that the rest of stdin stays the program's. The go
// line is "<mode> <cpu seconds>". The interpreter sets its CPU limit from there on: the time spent
// so far is not the program's (RLIMIT_CPU counts whole seconds, so the program gets the limit, up
// to a second more, never less; one started for the run, not ahead, has only the second between
// its soft and hard limits to give, more than an interpreter's start takes). Then
// /workspace/__main__.py runs as a script (mode "script": `python3 /workspace/__main__.py`) or like
// a notebook cell (mode "interactive": statements in order, then the value of a final top-level
// expression through sys.displayhook). Names are kept inside a function and the function removes
// itself, so the user's globals are those of a plain script. Frames of the driver itself
// ("<string>") are cut from tracebacks so line numbers point at the user's code.
constexpr std::string_view kDriver = R"PY(def _ci_main():
    import os, stat, sys
    g = globals()
    del g['_ci_main']
    # Off the path until the program runs: the script's directory (the workspace, where the
    # program's files are), so that none of them stands in for a module imported here.
    if sys.path and not getattr(sys.flags, 'safe_path', False):
        sys.path.pop(0)
    import ast, math, resource
    try:
        ready = stat.S_ISFIFO(os.fstat(3).st_mode)  # pre-started: fd 3 says when it is ready
    except OSError:
        ready = False
    warm, sys.argv[1:] = sys.argv[1:], []
    if warm:
        here = os.getcwd()
        saved = os.dup(1), os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.chdir('/tmp')
        for name in warm:
            try:
                __import__(name)
            except BaseException:
                pass  # the program's own import says why
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null,) + saved:
            os.close(fd)
        os.chdir(here)
    if ready:
        import gc
        gc.freeze()  # what is here now is not the program's: its exit's collection skips it
        os.write(3, b'r')
        os.close(3)
    go = b''
    while not go.endswith(b'\n'):
        byte = os.read(0, 1)
        if not byte:
            os._exit(0)  # no run came: the sandbox is being removed
        go += byte
    mode, cpu = go.split()
    used = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(used.ru_utime + used.ru_stime + int(cpu))  # never less than the limit
    if ready:  # started with more CPU for the imports (kPrestartCpuAllowanceSec)
        resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
    else:  # started for this run, hard limit one second over: the start is not the program's
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        if hard != resource.RLIM_INFINITY:
            resource.setrlimit(resource.RLIMIT_CPU, (min(limit, hard), hard))
    path = '/workspace/__main__.py'
    g['__file__'] = path
    sys.argv[:] = [path]
    sys.path.insert(0, '/workspace')

    def report(exc, tb):
        while tb is not None and tb.tb_frame.f_code.co_filename == '<string>':
            tb = tb.tb_next
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        sys.exit(1)

    with open(path, 'rb') as f:
        source = f.read()
    try:
        tree = ast.parse(source, path)
        last = None
        if mode == b'interactive' and tree.body and isinstance(tree.body[-1], ast.Expr):
            last = compile(ast.Expression(tree.body.pop().value), path, 'eval')
        body = compile(tree, path, 'exec')
    except (SyntaxError, ValueError) as e:
        report(e, None)  # as when Python runs a script: the error, no compiler frames
    try:
        exec(body, g)
        if last is not None:
            sys.displayhook(eval(last, g))
    except SystemExit:
        raise
    except BaseException as e:
        report(e, e.__traceback__)
_ci_main()
)PY";

// The fork server of a Docker execution container (src/agent/python_fork_server.h, SandboxSpec::zygote_argv):
// its argv after the source names the warm imports, imported once here (quietly, from `/`, not
// the workspace). It makes itself non-dumpable (no program of its user reads its memory or
// traces it), says "ready" on fd 3 (its channel to the agent) and forks per request: a child
// that leaves the session and forks the program, reports the program's pid and exits. The
// program waits for that exit (then it is the agent's child, as the agent's execs are: no user
// code sees the short-lived parent), leaves the loop with its stdio, cwd, environment and argv
// set as the exec of `python3 -c DRIVER ARGS` would have them (its dumpable flag back on), runs
// the driver's source in this same __main__ and ends as `python3 -c` ends, without the full
// teardown; what it shares with the other programs of the container is listed in
// src/agent/README.md.
constexpr std::string_view kZygote = R"PY(def _ci_zygote():
    import ctypes, gc, os, socket, sys
    libc = ctypes.CDLL(None)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    channel = socket.socket(fileno=3)
    warm, sys.argv[1:] = sys.argv[1:], []
    path0 = sys.path.pop(0)
    for name in warm:
        try:
            __import__(name)
        except BaseException:
            pass  # the program's own import says why
    sys.stdout.flush()
    sys.stderr.flush()
    sys.path.insert(0, path0)
    gc.collect()
    gc.freeze()  # the programs' collections leave these objects (and their pages) alone
    channel.send(b'ready')
    while True:
        request, fds, _, _ = socket.recv_fds(channel, 1 << 20, 3)
        if not request:
            os._exit(0)
        fields = request.split(b'\0')
        child = os.fork()
        if child:
            for fd in fds:
                os.close(fd)
            os.waitpid(child, 0)
            continue
        try:
            os.setsid()
            child = os.getpid()
            program = os.fork()
            if program:
                channel.send(b'pid\0' + fields[0] + b'\0' + str(program).encode())
                os._exit(0)
            while os.getppid() == child:
                os.sched_yield()
            channel.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            for fd in fds:
                if fd > 2:
                    os.close(fd)
            end = fields.index(b'', 2)
            argv = [os.fsdecode(a) for a in fields[2:end]]
            os.chdir(fields[1])
            os.environ.clear()
            for kv in fields[end + 1:]:
                if b'=' in kv:
                    k, v = kv.split(b'=', 1)
                    os.environb[k] = v
            libc.prctl(4, 1, 0, 0, 0)
            if 'numpy' in sys.modules:
                sys.modules['numpy'].random.seed()  # random reseeds itself after a fork
            sys.argv[:] = ['-c'] + argv[3:]
            sys.orig_argv[:] = argv
            del globals()['_ci_zygote']
        except BaseException as e:
            try:
                channel.send(b'err\0' + fields[0] + b'\0' + repr(e).encode())
            except BaseException:
                os.write(2, b'fork server: ' + repr(e).encode() + b'\n')
            os._exit(126)
        status = 0
        try:
            exec(compile(argv[2], '<string>', 'exec'), globals())
        except SystemExit as e:
            status = 0 if e.code is None else e.code
            if not isinstance(status, int):
                print(status, file=sys.stderr)
                status = 1
        # The end of `python3 -c` without the teardown of every object, which would write to (and
        # copy) each page shared with the server: threads, atexit, then what __main__ held goes
        # (__del__ runs) and every file the program left open is flushed (what the collection
        # sees: the program's objects, the server's are frozen).
        if 'threading' in sys.modules:
            sys.modules['threading']._shutdown()
        import atexit, io
        atexit._run_exitfuncs()
        main = sys.modules['__main__'].__dict__
        for name in [n for n in main if n != '__builtins__']:
            del main[name]
        gc.collect()
        for obj in gc.get_objects():
            if isinstance(obj, io.IOBase):
                try:
                    obj.flush()
                except BaseException:
                    pass
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:
                pass
        os._exit(status & 0xff)
_ci_zygote()
)PY";

}  // namespace

std::string_view PythonDriver() { return kDriver; }

std::vector<std::string> PythonDriverModules() { return {"ast", "math", "resource", "stat"}; }

std::vector<std::string> PythonZygoteArgv(const std::vector<std::string>& warm_imports) {
  std::vector<std::string> argv = {"python3", "-c", std::string(kZygote)};
  argv.insert(argv.end(), warm_imports.begin(), warm_imports.end());
  return argv;
}

std::vector<std::string> PythonPrestartArgv(const std::vector<std::string>& warm_imports) {
  std::vector<std::string> argv = {"python3", "-c", std::string(kDriver)};
  argv.insert(argv.end(), warm_imports.begin(), warm_imports.end());
  return argv;
}

}  // namespace ci::daemon
