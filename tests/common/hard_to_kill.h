// Two Python programs for the kill tests of every backend (issue 30 item 1): one leaves processes
// that a kill going by /proc/PID/stat's text or by state misses, the other counts those alive.
#pragma once

namespace ci::testing_support {

// Leaves three processes in sessions of their own, stdio on /dev/null: named so that reading
// /proc/PID/stat by lines, or up to the first ')', misreads them; the last a thread-group leader
// that ended while its other thread runs (state Z, yet alive: a signal to it reaches the thread).
inline constexpr const char* kHardToKill =
    "import ctypes, os, threading, time\n"
    "libc = ctypes.CDLL(None)\n"
    "def leave(name, leader_ends=False):\n"
    "    r, w = os.pipe()\n"
    "    if os.fork() == 0:\n"
    "        os.setsid()\n"
    "        null = os.open('/dev/null', os.O_RDWR)\n"
    "        for fd in (0, 1, 2):\n"
    "            os.dup2(null, fd)\n"
    "        libc.prctl(15, name, 0, 0, 0)\n"
    "        if leader_ends:\n"
    "            threading.Thread(target=time.sleep, args=(100,)).start()\n"
    "            os.write(w, b'1')\n"
    "            libc.syscall(60, 0)\n"
    "        os.write(w, b'1')\n"
    "        time.sleep(100)\n"
    "        os._exit(0)\n"
    "    os.read(r, 1)\n"
    "leave(b'x\\n')\n"
    "leave(b'a) Z 1 1 1\\n')\n"
    "leave(b'leader', True)\n";

// How many of kHardToKill's processes are alive (a zombie with no thread left is dead).
inline constexpr const char* kHardToKillLeft =
    "import os\n"
    "left = 0\n"
    "for p in os.listdir('/proc'):\n"
    "    try:\n"
    "        status = open(f'/proc/{p}/status').read()\n"
    "        comm = open(f'/proc/{p}/comm', 'rb').read()\n"
    "    except (OSError, ValueError):\n"
    "        continue\n"
    "    dead = '\\nState:\\tZ' in status and '\\nThreads:\\t1\\n' in status\n"
    "    left += not dead and comm in (b'x\\n\\n', b'a) Z 1 1 1\\n\\n', b'leader\\n')\n"
    "print(left)";

}  // namespace ci::testing_support
