# Python's program, pre-started or not (SandboxSpec::prestart_argv), or forked from the fork
# server: the interpreter is up and has imported the modules named in its argv (warm imports,
# quietly: nothing they print is the run's), says so on fd 3 where it was pre-started, and then
# reads the go line on stdin, byte by byte so that the rest of stdin stays the program's. The go
# line is "<mode> <cpu seconds>". The interpreter sets its CPU limit from there on: the time spent
# so far is not the program's (RLIMIT_CPU counts whole seconds, so the program gets the limit, up
# to a second more, never less; one started for the run, not ahead, has only the second between
# its soft and hard limits to give, more than an interpreter's start takes). Then
# /workspace/__main__.py runs as a script (mode "script": `python3 /workspace/__main__.py`) or like
# a notebook cell (mode "interactive": statements in order, then the value of a final top-level
# expression through sys.displayhook). Names are kept inside a function and the function removes
# itself, so the user's globals are those of a plain script. Frames of the driver itself
# ("<string>") are cut from tracebacks so line numbers point at the user's code. Rich results
# (rich_results.py: display(), matplotlib's figures, a rich last value) go as JSON lines to
# RESULTS in the workspace, which the daemon takes out of the collected files.
def _ci_main():
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
    rich_source = (None  # @rich_results.py@
                   )
    # Forked from the fork server: run there once (warm_up.py), not in every program.
    rich = g.pop('__ci_compiled__', {}).get(('ran', rich_source))
    if rich is None:
        rich = {'__name__': '_ci_rich'}
        exec(compile(rich_source, '<string>', 'exec'), rich)
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
        else:  # forked from a pod's fork server, whose own CPU time is not limited
            resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
    path, results = '/workspace/__main__.py', '/workspace/.ci-results.jsonl'

    def sink(result):
        with open(results, 'a') as f:
            f.write(rich['json'].dumps(result, default=str) + '\n')
    rich['install'](sink)
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
        try:
            exec(body, g)
            if last is not None:
                value = eval(last, g)
                sys.displayhook(value)
                if rich['rich'](value):
                    sink({'is_main_result': True, **rich['bundle'](value)})
        finally:
            rich['finish']()
    except SystemExit:
        raise
    except BaseException as e:
        report(e, e.__traceback__)
_ci_main()
