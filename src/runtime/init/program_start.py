# Each program, forked: defined (compiled) once in the zygote as sys._ci_program, called once in
# the program's process, where it never returns. First what `python3 -c` has at its start and a
# fork does not give: the source (passed as sys.argv's last item) and sys.orig_argv, signal
# dispositions, sys.path[0], fresh random state. Then it runs the source (its code object when
# the zygote compiled it ahead) in __main__ and ends the process the way `python3 -c` does: exit
# status from SystemExit (its message on stderr when not a number), a traceback and 1 for any other
# exception (KeyboardInterrupt: killed by SIGINT), non-daemon threads waited for, atexit handlers
# run, and 120 when stdout cannot be flushed. Instead of the interpreter's whole teardown (~70 ms
# with pandas loaded, copying most of the zygote's pages), every file the program left open is
# flushed (texts before their buffers: a collection alone finalizes a cycle's objects in any order
# and can lose what a file held), what it made is dropped (__main__'s names, then a collection, so
# __del__ methods run), and the process exits at once.
def _ci_program():
    import atexit, gc, io, os, signal, sys
    source = sys.argv.pop()
    sys.orig_argv[:] = ['python3', '-c', source] + sys.argv[1:]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    compiled = sys.__dict__.pop('_ci_compiled')
    code = compiled.get(source)
    sys.path.insert(0, '')
    numpy_random = sys.modules.get('numpy.random')
    if numpy_random is not None:  # a fork shares the zygote's global state: a new one
        try:  # 624 words from the kernel: what seed() makes, at a third of its page faults
            key = sys.modules['numpy'].frombuffer(os.urandom(2496), dtype='uint32')
            numpy_random.mtrand._rand.set_state(('MT19937', key, 624))
        except Exception:
            numpy_random.seed()
    main = sys.modules['__main__'].__dict__
    if '__ci_compiled__' in source:  # a program that runs more of what the zygote compiled
        main['__ci_compiled__'] = compiled
    del compiled
    interrupted = False
    try:
        if code is None:
            code = compile(source, '<string>', 'exec')
        exec(code, main)
        status = 0
    except SystemExit as e:
        status = e.code
        if status is None:
            status = 0
        elif not isinstance(status, int):
            print(status, file=sys.stderr)
            status = 1
    except BaseException as e:
        tb = e.__traceback__.tb_next  # from the program's first frame on
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        status = 1
        interrupted = isinstance(e, KeyboardInterrupt)
    del source, code
    threading = sys.modules.get('threading')
    if threading is not None:
        threading._shutdown()
    atexit._run_exitfuncs()
    files = [o for o in gc.get_objects() if isinstance(o, io.IOBase)]
    for text_first in (True, False):
        for f in files:
            if isinstance(f, io.TextIOBase) == text_first:
                try:
                    f.flush()
                except Exception:
                    pass
    del files
    main.clear()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = status or 120
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status & 0xff)
__import__('sys')._ci_program = _ci_program
del _ci_program
