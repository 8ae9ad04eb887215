// Two Python programs for the session tests of both backends: a background "keeper" that takes
// a run's stdout over an abstract unix socket and starts a long sleep holding it (as a persistent
// interpreter's subprocess would), and the run that hands its stdout over.
#pragma once

namespace ci::testing_support {

inline constexpr const char* kFdKeeperProgram =
    "import socket, subprocess\n"
    "s = socket.socket(socket.AF_UNIX); s.bind('\\0ci-test'); s.listen()\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    _, fds, _, _ = socket.recv_fds(c, 1, 1)\n"
    "    subprocess.Popen(['sleep', '300'], stdout=fds[0])\n"
    "    c.send(b'k'); c.close()\n";

inline constexpr const char* kFdHandOverProgram =
    "import socket, time\n"
    "for _ in range(100):\n"
    "    try:\n"
    "        s = socket.socket(socket.AF_UNIX); s.connect('\\0ci-test'); break\n"
    "    except OSError: time.sleep(0.05)\n"
    "socket.send_fds(s, [b'x'], [1]); s.recv(1); print('handed over')\n";

}  // namespace ci::testing_support
