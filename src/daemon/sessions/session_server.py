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
import ast, builtins, ctypes, hmac, json, linecache, os
import select, signal, socket, sys, threading

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
    g = {'__name__': '__main__', '__builtins__': builtins}
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
