# The fork server of a Docker execution container (src/agent/python_fork_server.h, SandboxSpec::zygote_argv):
# its argv after the source names the warm imports, imported once here (quietly, from `/`, not
# the workspace). It makes itself non-dumpable (no program of its user reads its memory or
# traces it), says "ready" on fd 3 (its channel to the agent) and forks per request: a child
# that leaves the session and forks the program, reports the program's pid and exits. The
# program waits for that exit (then it is the agent's child, as the agent's execs are: no user
# code sees the short-lived parent), leaves the loop with its stdio, cwd, environment and argv
# set as the exec of `python3 -c DRIVER ARGS` would have them (its dumpable flag back on), runs
# the driver's source in this same __main__ and ends as `python3 -c` ends, without the full
# teardown; what it shares with the other programs of the container is listed in
# src/agent/README.md.
def _ci_zygote():
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
