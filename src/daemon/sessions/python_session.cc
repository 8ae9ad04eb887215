#include "daemon/sessions/python_session.h"

#include "core/json.h"

namespace ci::daemon {
namespace {

// The server. Its only channel is one it inherited: a socket on fd 3 (local), one end of a socket
// pair whose other end init holds; each call is [u32 length][request JSON] with the call's stdin,
// stdout and stderr attached (SCM_RIGHTS), answered with [i32 status][u8 flags]. Otherwise
// (docker) it is its exec's stdio, held by the daemon: each call is [u32 length][request JSON]
// [u32 length][stdin][32-byte nonce] on stdin; the cell writes to the exec's stdout and stderr
// directly, and the call ends with a marker on both (kMarkerStart, the nonce, the status as three
// digits, the flags as one, a newline): each stream is ordered, the two are not. Flag 1: the
// cell was interrupted at its timeout (SIGALRM -> KeyboardInterrupt; the state survives).
// Everything else is bounded from outside (python_session.h). Non-dumpable first: no other
// process of the sandbox user may open /proc/<pid>/fd of it, ptrace it or read its memory.
constexpr std::string_view kServer = R"PY(import ast, builtins, ctypes, json, linecache, os
import signal, socket, stat, sys, threading

if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
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


class StreamChannel:
    def __init__(self):
        # Private copies (not inherited): a cell that closes or redirects fds 1 and 2 gets them
        # back at the next call, and the markers always reach the exec's streams.
        self.control, self.out, self.err = os.dup(0), os.dup(1), os.dup(2)
        os.dup2(DEVNULL, 0)
        os.write(1, b'%d\n' % os.getpid())

    def read(self, n):
        return os.read(self.control, n)

    def receive(self):
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
        for fd in (self.out, self.err):
            os.write(fd, mark)


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
        exec(body, g)
        if last is not None:
            sys.displayhook(eval(last, g))
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


def serve(request, g, number):
    global ALARMED
    ALARMED = False
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


def main():
    try:
        local = stat.S_ISSOCK(os.fstat(3).st_mode)
    except OSError:
        local = False
    channel = SocketChannel() if local else StreamChannel()
    signal.signal(signal.SIGALRM, on_alarm)
    os.chdir('/workspace')
    sys.argv[:] = ['']
    sys.path.insert(0, '/workspace')
    g = {'__name__': '__main__', '__builtins__': builtins}
    number = 0
    while True:
        try:
            request = channel.receive()
        except (OSError, EOFError, ValueError):
            os._exit(0)  # the channel ended (the session, or the runtime gave up on us)
        number += 1
        status, flags = serve(request, g, number)
        channel.answer(status, flags)


main()
)PY";

}  // namespace

std::string_view PythonSessionServerSource() { return kServer; }

std::vector<std::string> PythonSessionServerArgv() {
  return {"python3", "-c", std::string(kServer)};
}

std::string PythonSessionRequest(std::string_view code, bool last_line_interactive,
                                 int64_t timeout_ms) {
  return JsonText([&](JsonWriter& w) {
    w.StartObject();
    WriteField(w, "code", code);
    w.Key("last_line_interactive");
    w.Bool(last_line_interactive);
    w.Key("timeout_ms");
    w.Int64(timeout_ms);
    w.EndObject();
  });
}

}  // namespace ci::daemon
