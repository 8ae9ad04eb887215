# Run in the fork server, then called with the modules and the sources: the warm imports with
# stdout and stderr going nowhere and the working directory /, then the environment put back as it
# was (an import may change os.environ; nothing runs here after this), and the sources compiled
# ahead (one that does not compile is left to the program, which then reports it). A source that
# says `# ci: run ahead` on its first line defines a module with no effect until called: it is
# run here too, into a namespace kept under ('ran', SOURCE), which a program uses (its own copy)
# instead of running the source again.
def _ci_warm(modules, sources):
    import os, sys
    env = dict(os.environ)
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    for name in modules:
        try:
            __import__(name)
        except BaseException:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    for fd in (null,) + saved:
        os.close(fd)
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)
    sys._ci_compiled = {}
    for source in sources:
        try:
            sys._ci_compiled[source] = compile(source, '<string>', 'exec')
            if source.startswith('# ci: run ahead'):
                ran = {'__name__': '_ci_rich'}
                exec(sys._ci_compiled[source], ran)
                sys._ci_compiled[('ran', source)] = ran
        except BaseException:
            pass
    import atexit, gc, io, signal  # what every program's start and end use
    gc.collect()  # the imports' garbage: not copied into every fork
    gc.freeze()  # the programs' collections skip (and do not copy) what is here
