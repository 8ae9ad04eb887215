#include "daemon/python_session.h"

#include "core/json.h"

namespace ci {
namespace {

// One connection per call: [u32 length][request JSON] with the client's fds 0, 1, 2 attached;
// the server answers b"A" once it took the call, then the cell's status as an i32. Timeouts:
// SIGALRM raises KeyboardInterrupt when the call's time is up; if the interpreter is stuck where
// Python cannot interrupt it, faulthandler's watchdog thread (C, no GIL needed) ends the process
// after a grace period — the next call then starts a new interpreter and says the state is lost.
constexpr std::string_view kServer = R"PY(import ast, builtins, faulthandler, json, linecache, os
import resource, signal, socket, sys

ADDRESS = '\0code-interpreter-python'
GRACE_SEC = 2.0


def recv_request(conn):
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    while len(head) < 4:
        more = conn.recv(4 - len(head))
        if not more:
            raise EOFError
        head += more
    size = int.from_bytes(head, 'little')
    body = b''
    while len(body) < size:
        more = conn.recv(min(1 << 20, size - len(body)))
        if not more:
            raise EOFError
        body += more
    return json.loads(body), fds


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
    raise KeyboardInterrupt


def on_xcpu(signum, frame):
    raise RuntimeError('CPU time limit of this call exceeded')


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


def limit_cpu(seconds):
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime) + 1 + seconds if seconds else hard
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def serve(conn, g, number, devnull, watchdog_log):
    request, fds = recv_request(conn)
    if len(fds) != 3:
        return
    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    conn.sendall(b'A')
    sys.stdin = open(0, 'r', closefd=False)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    timeout = request['timeout_ms'] / 1000.0
    faulthandler.dump_traceback_later(timeout + GRACE_SEC, exit=True, file=watchdog_log)
    limit_cpu(request['cpu_time_sec'])
    signal.setitimer(signal.ITIMER_REAL, timeout)
    status = 1
    try:
        try:
            status = run_cell(request, g, number)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            limit_cpu(0)
    except BaseException:
        pass  # the one-shot alarm (or a CPU signal) landed after the cell had its answer
    faulthandler.cancel_dump_traceback_later()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    for target in (0, 1, 2):
        os.dup2(devnull, target)
    conn.sendall(status.to_bytes(4, 'little', signed=True))


def main():
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(ADDRESS)
    except OSError:
        return  # an interpreter already serves this session
    server.listen(16)
    devnull = os.open(os.devnull, os.O_RDWR)
    watchdog_log = open(os.devnull, 'w')
    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGXCPU, on_xcpu)
    os.chdir('/workspace')
    sys.argv[:] = ['']
    sys.path.insert(0, '/workspace')
    g = {'__name__': '__main__', '__builtins__': builtins}
    number = 0
    while True:
        conn, _ = server.accept()
        number += 1
        try:
            serve(conn, g, number, devnull, watchdog_log)
        except (OSError, EOFError, ValueError, KeyboardInterrupt):
            pass
        finally:
            conn.close()


main()
)PY";

constexpr std::string_view kClient = R"PY(import os, signal, socket, sys, time

ADDRESS = '\0code-interpreter-python'


def read_exact(n):
    data = b''
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def no_interpreter():
    os.kill(os.getpid(), signal.SIGUSR2)


size = int.from_bytes(read_exact(4), 'little')
request = read_exact(size)
deadline = time.monotonic() + (10 if len(sys.argv) > 1 else 0)
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(ADDRESS)
        break
    except OSError:
        s.close()
        if time.monotonic() >= deadline:
            no_interpreter()
        time.sleep(0.005)
try:
    socket.send_fds(s, [len(request).to_bytes(4, 'little') + request], [0, 1, 2])
    ack = s.recv(1)
except OSError:
    ack = b''
if not ack:
    no_interpreter()
status = b''
while len(status) < 4:
    try:
        chunk = s.recv(4 - len(status))
    except OSError:
        chunk = b''
    if not chunk:
        os.write(2, b'\n[code-interpreter] The Python interpreter of this session stopped during '
                    b'this call (it exited, or was killed after its timeout or for memory); its '
                    b'state is lost and the next call starts a new one.\n')
        os._exit(1)
    status += chunk
os._exit(int.from_bytes(status, 'little', signed=True) & 0xff)
)PY";

}  // namespace

std::string_view PythonSessionServerSource() { return kServer; }
std::string_view PythonSessionClientSource() { return kClient; }

std::vector<std::string> PythonSessionServerArgv() {
  return {"python3", "-c", std::string(kServer)};
}

std::vector<std::string> PythonSessionClientArgv(bool wait_for_server) {
  std::vector<std::string> argv = {"python3", "-I", "-S", "-c", std::string(kClient)};
  if (wait_for_server) argv.push_back("wait");
  return argv;
}

std::string PythonSessionClientStdin(std::string_view code, bool last_line_interactive,
                                     int64_t timeout_ms, uint32_t cpu_time_sec,
                                     std::string_view user_stdin) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();
  WriteField(w, "code", code);
  w.Key("last_line_interactive");
  w.Bool(last_line_interactive);
  w.Key("timeout_ms");
  w.Int64(timeout_ms);
  w.Key("cpu_time_sec");
  w.Uint(cpu_time_sec);
  w.EndObject();
  std::string out;
  const auto size = static_cast<uint32_t>(buf.GetSize());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((size >> (8 * i)) & 0xff);
  out.append(buf.GetString(), buf.GetSize());
  out += user_stdin;
  return out;
}

}  // namespace ci
