# The session's interpreter. Its only channel is one it inherited or authenticated. Local: a socket on fd 3,
# one end of a socket pair whose other end init holds; each call is [u32 length][request JSON]
# with the call's stdin, stdout and stderr attached (SCM_RIGHTS), answered with [i32 status]
# [u8 flags]. Docker and Kubernetes (`channel`): the interpreter lives detached in the sandbox,
# listening on an abstract socket of the sandbox's own network namespace, and each daemon replica
# reaches it through an exec of its own, the relay (`channel` and `channel attach`). The relay
# says `ready` once it is non-dumpable, reads the sandbox's token (hex, one line) from its stdin,
# and proves it to the interpreter (an HMAC over both sides' challenges, each way: a process of
# the sandbox without the token can neither be served nor pose as the interpreter); then it hands
# over its stdin, stdout and stderr (SCM_RIGHTS), prints `new PID` or `attached PID` (`none`:
# nothing listens and it was told only to attach) and stays until the interpreter drops it: when
# the next relay comes (another replica, or this one after its exec broke) or the interpreter
# dies. On the relay's stdio each call is [u32 length][request JSON][u32 length][stdin][32-byte
# nonce]; the cell writes to the relay's stdout and stderr directly, and the call ends with a
# marker on both (kMarkerStart, the nonce, the status as three digits, the flags as one, a
# newline): each stream is ordered, the two are not. Flag 1: the cell was interrupted at its
# timeout (SIGALRM -> KeyboardInterrupt; the state survives). Everything else is bounded from
# outside (python_session.h). Non-dumpable first: no other process of the sandbox user may open
# /proc/<pid>/fd of it, ptrace it or read its memory (the token, the relay's stdin). The
# interpreter and the relays are named ci-interpreter and ci-relay (PR_SET_NAME): a run's cleanup
# spares the sessions they lead (sandbox_shell.cc).
# A request may instead be {"op": "dump"|"load", "path", "timeout_ms"}: the namespace's names saved
# to the file (mode 0600, renamed into place) or restored from it (then deleted), with dill when
# importable, else pickle; stdout's one JSON line says {"kept", "lost": [{"name", "why"}], "bytes"}
# (status 0) or {"error"} (status 1: nothing written, or a bad file left in place, names untouched).
import ast, builtins, ctypes, hmac, io, json, linecache, os
import select, signal, socket, sys, threading, types

LIBC = ctypes.CDLL(None, use_errno=True)
if LIBC.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    os.write(2, b'code-interpreter: prctl(PR_SET_DUMPABLE) failed\n')
    os._exit(125)
DEVNULL = os.open(os.devnull, os.O_RDWR)
ALARMED = False


def read_exact(read, n):
    data = b''
    while len(data) < n:
        more = read(n - len(data))
        if not more:
            raise EOFError
        data += more
    return data


class SocketChannel:
    def __init__(self):
        os.set_inheritable(3, False)
        self.sock = socket.socket(fileno=3)

    def receive(self):
        head, fds, _, _ = socket.recv_fds(self.sock, 4, 3)
        if not head:
            raise EOFError
        try:
            head += read_exact(self.sock.recv, 4 - len(head))
            request = json.loads(read_exact(self.sock.recv, int.from_bytes(head, 'little')))
            if len(fds) != 3:
                raise EOFError
            for fd, target in zip(fds, (0, 1, 2)):
                os.dup2(fd, target)
        finally:
            for fd in fds:
                os.close(fd)
        return request

    def answer(self, status, flags):
        for target in (0, 1, 2):
            os.dup2(DEVNULL, target)
        self.sock.sendall(status.to_bytes(4, 'little', signed=True) + bytes([flags]))


def feed(fd, data):
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass
    finally:
        os.close(fd)


ADDRESS = b'\0code-interpreter-session'


def set_name(name):
    LIBC.prctl(15, name, 0, 0, 0)  # PR_SET_NAME


def proof(token, ours, theirs, who):
    return hmac.new(token, ours + theirs + who, 'sha256').digest()


class RelayChannel:
    """The interpreter's side of `channel`: one relay's stdio at a time."""

    def __init__(self, listener, token):
        self.listener, self.token = listener, token
        self.conn = None

    def accept(self):
        conn, _ = self.listener.accept()
        try:
            conn.settimeout(5)
            challenge = os.urandom(16)
            conn.sendall(challenge)
            got = read_exact(conn.recv, 48)
            if not hmac.compare_digest(got[16:], proof(self.token, challenge, got[:16], b'relay')):
                raise EOFError
            conn.sendall(proof(self.token, got[:16], challenge, b'interpreter')
                         + os.getpid().to_bytes(4, 'little'))
            _, fds, _, _ = socket.recv_fds(conn, 1, 3)
            if len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                raise EOFError
            conn.settimeout(None)
        except (OSError, EOFError):
            conn.close()
            return
        self.drop()
        for fd in fds:
            os.set_inheritable(fd, False)
        self.conn = conn
        self.control, self.out, self.err = fds

    def drop(self):
        if self.conn is None:
            return
        for target in (1, 2):  # what a cell's threads print between calls goes nowhere
            os.dup2(DEVNULL, target)
        for fd in (self.control, self.out, self.err):
            os.close(fd)
        self.conn.close()
        self.conn = None

    def read(self, n):
        return os.read(self.control, n)

    def receive(self):
        while True:
            waiting = [self.listener] + ([self.control] if self.conn else [])
            ready, _, _ = select.select(waiting, [], [])
            if self.conn and self.control in ready:
                try:
                    return self.frame()
                except (OSError, EOFError, ValueError):
                    self.drop()  # its replica went away; the next relay brings another
            elif self.listener in ready:
                self.accept()

    def frame(self):
        size = int.from_bytes(read_exact(self.read, 4), 'little')
        request = json.loads(read_exact(self.read, size))
        size = int.from_bytes(read_exact(self.read, 4), 'little')
        data = read_exact(self.read, size)
        self.nonce = read_exact(self.read, 32)
        r, w = os.pipe()
        if len(data) <= 4096:  # fits the pipe: no thread (a cell may count them)
            os.write(w, data)
            os.close(w)
        else:
            threading.Thread(target=feed, args=(w, data), daemon=True).start()
        os.dup2(r, 0)
        os.close(r)
        os.dup2(self.out, 1)
        os.dup2(self.err, 2)
        return request

    def answer(self, status, flags):
        os.dup2(DEVNULL, 0)
        mark = b'\x1e' + self.nonce + b'%03d%d\n' % (status & 0xff, flags)
        try:
            for fd in (self.out, self.err):
                os.write(fd, mark)
        except OSError:
            self.drop()


def read_line(fd):
    line = b''
    while not line.endswith(b'\n'):
        more = os.read(fd, 1)
        if not more:
            raise EOFError
        line += more
    return line


def connect():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(ADDRESS)
        return sock
    except OSError:
        sock.close()
        return None


def start_interpreter(token):
    """Binds the address, then forks the interpreter: detached, its own session."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(ADDRESS)
    listener.listen(8)
    if os.fork() == 0:
        os.setsid()
        set_name(b'ci-interpreter')
        for target in (0, 1, 2):
            os.dup2(DEVNULL, target)
        interpret(RelayChannel(listener, token))
    listener.close()


def relay(attach_only):
    set_name(b'ci-relay')
    os.write(1, b'ready\n')
    token = bytes.fromhex(read_line(0).decode().strip())
    sock, kind = connect(), b'attached'
    if sock is None:
        if attach_only:
            os.write(1, b'none\n')
            os._exit(0)
        start_interpreter(token)
        sock, kind = connect(), b'new'
    challenge = os.urandom(16)
    theirs = read_exact(sock.recv, 16)
    sock.sendall(challenge + proof(token, theirs, challenge, b'relay'))
    got = read_exact(sock.recv, 36)
    if not hmac.compare_digest(got[:32], proof(token, challenge, theirs, b'interpreter')):
        os.write(1, b'refused: what listens is not this sandbox\'s interpreter\n')
        os._exit(3)
    # Pipes of its own, copied to and from its stdio: what a cell leaves holding them cannot
    # keep this exec's stream open once the relay is gone.
    control_r, control_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    socket.send_fds(sock, [b'x'], [control_r, out_w, err_w])
    for fd in (control_r, out_w, err_w):
        os.close(fd)
    os.write(1, b'%s %d\n' % (kind, int.from_bytes(got[32:], 'little')))
    copies = {0: control_w, out_r: 1, err_r: 2}
    while True:
        ready, _, _ = select.select([sock] + list(copies), [], [])
        if sock in ready:
            os._exit(0)  # dropped: the interpreter serves another relay, or it died
        for src in ready:
            if not copy(src, copies[src]):
                if src == 0:
                    os._exit(0)  # the daemon hung up
                del copies[src]


def copy(src, dst):
    data = os.read(src, 65536)
    if not data:
        return False
    while data:
        data = data[os.write(dst, data):]
    return True


def report(exc, tb):
    # The server's own frames ("<string>": it runs with -c) are cut, wherever they are.
    frames = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != '<string>':
            frames.append(tb)
        tb = tb.tb_next
    for a, b in zip(frames, frames[1:]):
        a.tb_next = b
    if frames:
        frames[-1].tb_next = None
    tb = frames[0] if frames else None
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def on_alarm(signum, frame):
    global ALARMED
    ALARMED = True
    raise KeyboardInterrupt


def run_cell(request, g, number):
    name = '<cell %d>' % number
    source = request['code']
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    try:
        tree = ast.parse(source, name)
        last = None
        if request['last_line_interactive'] and tree.body and isinstance(tree.body[-1], ast.Expr):
            last = compile(ast.Expression(tree.body.pop().value), name, 'eval')
        body = compile(tree, name, 'exec')
    except (SyntaxError, ValueError) as e:
        report(e, None)
        return 1
    try:
        try:
            exec(body, g)
            if last is not None:
                value = eval(last, g)
                sys.displayhook(value)
                if RICH['rich'](value):
                    result_sink({'is_main_result': True, **RICH['bundle'](value)})
        finally:
            RICH['finish']()
        return 0
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code & 0xff
        print(e.code, file=sys.stderr)
        return 1
    except BaseException as e:
        report(e, e.__traceback__)
        return 1


# Rich results (rich_results.py) as JSON lines in the workspace, which the daemon takes out of
# the call's collected files; a call's own only (the previous call's file goes first).
RESULTS = '/workspace/.ci-results.jsonl'
RICH = {'__name__': '_ci_rich'}


def result_sink(result):
    with open(RESULTS, 'a') as f:
        f.write(json.dumps(result, default=str) + '\n')


# Saved state (ops dump and load). The file: STATE_MAGIC, the header's length (u64), the header
# (JSON: the pickler and one entry per name), each value's pickle, their out-of-band buffers
# (numpy's data, written and read as is) and a CRC-32 of everything before it.
STATE_MAGIC = b'CI-PYSTATE 1\n'
# The interpreter's own names, never saved.
OWN_NAMES = frozenset(('__builtins__', '__name__', '__doc__', '__package__', '__loader__',
                       '__spec__', '__annotations__', '__file__', '__cached__',
                       '__warningregistry__'))
# The cells' namespace is this module's dict: as sys.modules['__main__'] while dill works, cell
# functions keep it as their globals instead of carrying a copy of it.
MAIN = types.ModuleType('__main__')
# Live things that a pickle would bring back dead or as something else (dill reopens files).
LIVE = ((io.FileIO, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.BufferedRWPair,
         io.TextIOWrapper), 'an open file'), (socket.socket, 'a socket'), \
    (threading.Thread, 'a thread'), \
    ((types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType), 'a running generator')


class BadState(Exception):
    """The file is not a whole state file: nothing of it is used."""


def why(e):
    text = str(e) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + '...'


def state_dill():
    try:
        import dill
        return dill
    except Exception:
        return None


class MainIsCells:
    """sys.modules['__main__'] is the cells' namespace meanwhile (dill looks it up by name)."""

    def __enter__(self):
        self.saved = sys.modules['__main__']
        sys.modules['__main__'] = MAIN

    def __exit__(self, *_):
        sys.modules['__main__'] = self.saved


def state_pickler(g, sink, buffers, dill):
    import pickle
    base = dill.Pickler if dill else pickle._Pickler  # the Python one: its memo can be rolled back
    ndarray = getattr(sys.modules.get('numpy'), 'ndarray', None)

    class Pickler(base):
        def persistent_id(self, obj):
            if obj is g:
                return 'g'
            for kinds, what in LIVE:
                if isinstance(obj, kinds):
                    raise pickle.PicklingError(
                        "cannot pickle '%s' object (%s)" % (type(obj).__name__, what))
            return None

        def get(self, i):
            self.gets.add(i)  # which earlier names this one shares objects with
            return super().get(i)

        if ndarray is not None:
            def reducer_override(self, obj):
                # numpy's own protocol-5 reduction: the data out of band, not dill's copy in band.
                return obj.__reduce_ex__(5) if type(obj) is ndarray else NotImplemented

    kw = {'byref': False, 'recurse': False} if dill else {}
    pickler = Pickler(sink, 5, buffer_callback=buffers.append, **kw)
    if dill:
        pickler._main = MAIN
    return pickler


class Sink:
    def __init__(self):
        self.parts = []

    def write(self, data):
        # The pure-Python pickler hands over views of frames it is done with; copies keep it safe.
        self.parts.append(data if type(data) is bytes else bytes(data))


class NoContext:
    def __enter__(self):
        pass

    def __exit__(self, *_):
        pass


def dump_state(path, g):
    dill = state_dill()
    sink, buffers = Sink(), []
    pickler = state_pickler(g, sink, buffers, dill)
    entries, kept, lost = [], [], []
    starts, saved = [], []  # each saved value's first memo index, to name what a later one shares
    with MainIsCells() if dill else NoContext():
        for name, value in list(g.items()):
            if not isinstance(name, str):
                lost.append({'name': repr(name), 'why': 'not a string name'})
                continue
            if name in OWN_NAMES:
                continue
            if isinstance(value, types.ModuleType):
                module = getattr(value, '__name__', None)
                if value is not MAIN and isinstance(module, str) and \
                        sys.modules.get(module) is value:
                    entries.append({'name': name, 'module': module})
                    kept.append(name)
                else:
                    lost.append({'name': name, 'why': 'module %r is not importable by name' %
                                 (module,)})
                continue
            parts, bufs, memo = len(sink.parts), len(buffers), len(pickler.memo)
            pickler.gets = set()
            try:
                pickler.dump(value)
            except Exception as e:
                del sink.parts[parts:], buffers[bufs:]
                for key in [k for k, (i, _) in pickler.memo.items() if i >= memo]:
                    del pickler.memo[key]
                getattr(pickler, '_postproc', {}).clear()
                pickler.framer.current_frame = None
                lost.append({'name': name, 'why': why(e)})
                continue
            deps = sorted({bisect_right(starts, i) - 1 for i in pickler.gets if i < memo})
            entries.append({'name': name, 'size': sum(len(p) for p in sink.parts[parts:]),
                            'buffers': len(buffers) - bufs, 'memo': len(pickler.memo),
                            'deps': [saved[d] for d in deps]})
            starts.append(memo)
            saved.append(name)
            kept.append(name)
    raws = [b.raw() for b in buffers]
    header = json.dumps({'pickler': 'dill' if dill else 'pickle', 'entries': entries,
                         'buffers': [r.nbytes for r in raws]}).encode()
    head = STATE_MAGIC + len(header).to_bytes(8, 'little') + header
    tmp = os.path.join(os.path.dirname(path),
                       '.%s.%s' % (os.path.basename(path), os.urandom(6).hex()))
    import zlib
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with open(fd, 'wb') as f:
            os.fchmod(fd, 0o600)
            crc, size = 0, 0
            for piece in [head] + sink.parts + raws:
                f.write(piece)
                crc = zlib.crc32(piece, crc)
                size += len(piece) if type(piece) is bytes else piece.nbytes
            f.write(crc.to_bytes(4, 'little'))
        # No fsync: a file that a crash left short fails its length or CRC check on load.
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return {'kept': kept, 'lost': lost, 'bytes': size + 4}


def bisect_right(starts, i):
    import bisect
    return bisect.bisect_right(starts, i)


def count(v):
    return type(v) is int and v >= 0


def well_formed(header, entries, values, sizes):
    names = set()
    for e in entries:
        if type(e.get('name')) is not str or e['name'] in OWN_NAMES:
            return False
        if 'module' in e:
            if type(e['module']) is not str:
                return False
            continue
        if not all(count(e.get(k)) for k in ('size', 'buffers', 'memo')) or \
                type(e.get('deps')) is not list or not all(d in names for d in e['deps']):
            return False
        names.add(e['name'])
    return header.get('pickler') in ('dill', 'pickle') and type(sizes) is list and \
        all(count(n) for n in sizes) and sum(e['buffers'] for e in values) == len(sizes)


def read_state(path):
    """(header, pickles, buffers) of a whole state file, else BadState."""
    import zlib
    with open(path, 'rb') as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(len(STATE_MAGIC) + 8)
        if head[:len(STATE_MAGIC)] != STATE_MAGIC[:len(head)] or not head:
            raise BadState('not a saved Python state (its first bytes are not %r)' % STATE_MAGIC)
        if len(head) < len(STATE_MAGIC) + 8:
            raise BadState('truncated: %d bytes, shorter than the header' % size)
        length = int.from_bytes(head[len(STATE_MAGIC):], 'little')
        if length > size:
            raise BadState('truncated: %d bytes, the header alone says %d' % (size, length))
        text = f.read(length)
        try:
            header = json.loads(text)
            entries, sizes = header['entries'], header['buffers']
            values = [e for e in entries if 'module' not in e]
            if not well_formed(header, entries, values, sizes):
                raise ValueError
        except Exception:
            raise BadState('its header is not that of a saved Python state') from None
        pickled = sum(e['size'] for e in values)
        want = len(head) + length + pickled + sum(sizes) + 4
        if size != want:
            raise BadState('truncated: %d bytes of %d' % (size, want) if size < want else
                           '%d bytes, the header says %d' % (size, want))
        crc = zlib.crc32(text, zlib.crc32(head))
        pickles = f.read(pickled)
        crc = zlib.crc32(pickles, crc)
        buffers = []
        for n in sizes:
            buf = bytearray(n)  # writable: arrays restored on it can be assigned to
            if f.readinto(buf) != n:
                raise BadState('truncated while reading it')
            crc = zlib.crc32(buf, crc)
            buffers.append(buf)
        if f.read(4) != crc.to_bytes(4, 'little'):
            raise BadState('corrupt: its CRC-32 does not match its content')
    return header, pickles, buffers


class BufferFeed:
    """The out-of-band buffers, from where the value being loaded starts."""

    def __init__(self, buffers):
        self.buffers, self.at = buffers, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.at >= len(self.buffers):
            raise StopIteration
        self.at += 1
        return self.buffers[self.at - 1]


def state_unpickler(g, data, feed, dill, memo=None):
    """The C unpickler; given a memo, the Python one (3.11's C one cannot be given a memo)."""
    import pickle
    base = pickle._Unpickler if memo is not None else dill.Unpickler if dill else \
        pickle.Unpickler

    class Unpickler(base):
        def persistent_load(self, pid):
            if pid == 'g':
                return g
            raise pickle.UnpicklingError('unknown persistent id %r' % (pid,))

        if dill and memo is not None:
            def find_class(self, module, name):  # as dill.Unpickler's
                if (module, name) == ('__builtin__', '__main__'):
                    return g
                if (module, name) == ('__builtin__', 'NoneType'):
                    return type(None)
                return super().find_class('dill._dill' if module == 'dill.dill' else module,
                                          name)

    if memo is not None:
        unpickler = Unpickler(data, buffers=feed)
        unpickler.memo = memo
    else:
        unpickler = Unpickler(data, buffers=feed, **({'ignore': True} if dill else {}))
        if dill:
            unpickler._main = MAIN
    return unpickler


def load_state(path, g):
    import importlib
    header, pickles, buffers = read_state(path)
    dill = state_dill() if header['pickler'] == 'dill' else None
    staged, kept, lost = {}, [], []
    failed = set()  # names whose memo entries are missing: who shares them is lost too
    data, feed = io.BytesIO(pickles), BufferFeed(buffers)
    unpickler = state_unpickler(g, data, feed, dill)
    fresh, offset, buffer, memo = False, 0, 0, 0
    with MainIsCells():
        for e in header['entries']:
            name = e['name']
            if 'module' in e:
                try:
                    staged[name] = importlib.import_module(e['module'])
                    kept.append(name)
                except Exception as ex:
                    lost.append({'name': name, 'why': why(ex)})
                continue
            start, offset, buffer = (offset, buffer), offset + e['size'], buffer + e['buffers']
            shared = [d for d in e['deps'] if d in failed]
            reason = 'saved with dill, which is not importable here' \
                if header['pickler'] == 'dill' and dill is None else \
                'shares objects with %s, which did not load' % ', '.join(shared) if shared else None
            if reason:
                lost.append({'name': name, 'why': reason})
                failed.add(name)
                fresh, memo = True, e['memo']
                continue
            if fresh:
                # The memo as the pickler's was: a failed name's indices hold placeholders, which
                # no name loaded after it refers to (its sharers are lost).
                old = unpickler.memo.copy()
                unpickler = state_unpickler(g, data, feed, dill,
                                            {i: old.get(i, BadState) for i in range(memo)})
                fresh = False
            data.seek(start[0])
            feed.at = start[1]
            try:
                value = unpickler.load()
                staged[name] = value
                kept.append(name)
                fresh = data.tell() != offset  # never expected; a new unpickler starts clean
            except Exception as ex:
                lost.append({'name': name, 'why': why(ex)})
                failed.add(name)
                fresh = True
            memo = e['memo']
    g.update(staged)
    try:
        os.unlink(path)
    except OSError:
        pass
    return {'kept': kept, 'lost': lost}


def run_op(request, g):
    path = request.get('path')
    try:
        if request['op'] not in ('dump', 'load'):
            raise BadState('no such op: %r (dump or load)' % (request['op'],))
        if not isinstance(path, str) or not os.path.isabs(path):
            raise BadState('the path must be absolute')
        answer = dump_state(path, g) if request['op'] == 'dump' else load_state(path, g)
        status = 0
    except KeyboardInterrupt:
        answer, status = {'error': 'interrupted at the call\'s timeout'}, 1
    except (BadState, OSError) as e:
        answer, status = {'error': why(e)}, 1
    except Exception as e:
        answer, status = {'error': '%s: %s' % (type(e).__name__, why(e))}, 1
    print(json.dumps(answer))
    return status


def serve(request, g, number):
    global ALARMED
    ALARMED = False
    try:
        os.unlink(RESULTS)
    except OSError:
        pass
    sys.stdin = open(0, 'r', closefd=False)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    signal.setitimer(signal.ITIMER_REAL, request['timeout_ms'] / 1000.0)
    status = 1
    try:
        try:
            if 'op' in request:
                status = run_op(request, g)
            else:
                status = run_cell(request, g, number)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException:
        pass  # the one-shot alarm landed after the cell had its answer
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return status, 1 if ALARMED else 0


def interpret(channel):
    signal.signal(signal.SIGALRM, on_alarm)
    os.chdir('/workspace')
    sys.argv[:] = ['']
    sys.path.insert(0, '/workspace')
    g = MAIN.__dict__
    g['__builtins__'] = builtins
    exec(compile(None  # @rich_results.py@
                 , '<string>', 'exec'), RICH)
    RICH['install'](result_sink)
    number = 0
    while True:
        try:
            request = channel.receive()
        except (OSError, EOFError, ValueError):
            os._exit(0)  # the channel ended (the session, or the runtime gave up on us)
        number += 1
        status, flags = serve(request, g, number)
        channel.answer(status, flags)


def main():
    if sys.argv[1:2] == ['channel']:
        relay(sys.argv[2:] == ['attach'])
    interpret(SocketChannel())


main()
