// The seccomp layer from inside real sandboxes: the executor profile is installed, what
// policies/README.md lists as denied is refused by the filter itself, the argument rules hold,
// SECCOMP_LOG_DENIED lets calls through, and setuid binaries gain nothing.
#include <gmock/gmock.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <seccomp.h>

#include "core/policies.h"
#include "policy_readme.h"
#include "sandbox_fixture.h"

namespace ci::testing_support {
namespace {

using ::testing::HasSubstr;

// An errno no denied call returns by itself: seeing it proves the filter, not a missing
// capability, refused the call.
constexpr int kMarkerErrno = 133;  // EHWPOISON (Python 3.11 has no name for it: printed as 133)

// Shared by the probes: raw system calls by number, every argument a C long.
constexpr const char* kSyscallPrelude = R"PY(
import ctypes, errno, os, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    if r == 0 and nr == 56:  # a clone that got through: the child leaves at once
        os._exit(0)
    return f"{r} {errno.errorcode.get(e, e)}" if r == -1 else "ok"
)PY";

std::string Executor() { return std::string(*EmbeddedPolicy("seccomp-executor")); }

// The executor profile with only its default errno changed to the marker.
std::string WithMarkerErrno(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str());
  d["defaultErrnoRet"].SetInt(kMarkerErrno);
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  d.Accept(w);
  return buf.GetString();
}

class SeccompTest : public SandboxTest {
 protected:
  std::string Probe(const std::string& profile, const std::string& code, bool log_denied = false) {
    SandboxSpec spec = DefaultSpec();
    spec.security.seccomp_profile_json = profile;
    spec.security.seccomp_log_denied = log_denied;
    Execution ex = Execute(spec, Python(std::string(kSyscallPrelude) + code));
    EXPECT_TRUE(ex.outcome && ex.outcome->ok()) << ex.outcome->status().message();
    EXPECT_EQ((*ex.outcome)->exit_code, 0) << ex.err;
    return ex.out;
  }
};

TEST_F(SeccompTest, FilterIsInstalledAndLocked) {
  std::string out = Probe(Executor(), R"PY(
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print("Seccomp", status["Seccomp"].strip(), status["Seccomp_filters"].strip())
print("securebits", libc.prctl(27, 0, 0, 0, 0))  # PR_GET_SECUREBITS
)PY");
  EXPECT_THAT(out, HasSubstr("Seccomp 2 1\n"));
  // NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE and their locks, KEEP_CAPS_LOCKED (0xef).
  EXPECT_THAT(out, HasSubstr("securebits 239\n"));
}

TEST_F(SeccompTest, NoFilterWithoutAProfile) {
  std::string out = Probe("", R"PY(
print("Seccomp", [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0])
)PY");
  EXPECT_THAT(out, HasSubstr("Seccomp 0\n"));
}

TEST_F(SeccompTest, DeniedListIsRefused) {
  std::string calls = "for name, nr in [";
  int tested = 0;
  for (const auto& name : DeniedInReadme("seccomp-executor")) {
    int nr = seccomp_syscall_resolve_name_arch(seccomp_arch_native(), name.c_str());
    if (nr < 0) continue;  // not a system call on this architecture (stime, umount on x86_64)
    calls += "(\"" + name + "\", " + std::to_string(nr) + "), ";
    ++tested;
  }
  ASSERT_GT(tested, 40);
  // -1 everywhere: no denied call could succeed or do harm with it even if the filter let it by.
  calls += "]:\n    print(name, call(nr, -1, -1, -1, -1, -1, -1))\n";
  std::string enforced = Probe(Executor(), calls);
  std::string marked = Probe(WithMarkerErrno(Executor()), calls);
  std::istringstream a(enforced), b(marked);
  std::string line;
  int lines = 0;
  while (std::getline(a, line)) {
    ++lines;
    EXPECT_THAT(line, ::testing::ContainsRegex(" -1 (EPERM|ENOSYS)$")) << line;
  }
  EXPECT_EQ(lines, tested) << enforced;
  lines = 0;
  while (std::getline(b, line)) {
    ++lines;
    EXPECT_THAT(line, HasSubstr(" -1 133")) << "not refused by the filter: " << line;
  }
  EXPECT_EQ(lines, tested) << marked;
}

TEST_F(SeccompTest, ArgumentRules) {
  std::string out = Probe(WithMarkerErrno(Executor()), R"PY(
CLONE_NEWUSER, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x40000000, 17
print("clone_newuser", call(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0))
print("clone_newnet", call(56, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0))
print("clone3", call(435, 0, 0))
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitpid(pid, 0)[1] >> 8)
t = threading.Thread(target=lambda: None); t.start(); t.join(); print("thread ok")
print("posix_spawn", os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)[1])
for label, args in [("unix", (1, 1, 0)), ("inet_stream", (2, 1, 0)), ("inet6_dgram", (10, 2, 0)),
                    ("inet_stream_cloexec", (2, 1 | 0x80000, 0)), ("netlink_route", (16, 3, 0)),
                    ("packet", (17, 3, 0)), ("inet_raw", (2, 3, 1)), ("inet6_raw", (10, 3, 58)),
                    ("netlink_audit", (16, 3, 9)), ("alg", (38, 5, 0)), ("vsock", (40, 1, 0)),
                    ("unix_high_bits", (1 | (1 << 32), 1, 0))]:
    print("socket_" + label, call(41, *args))
print("personality_query", call(135, 0xffffffff))
print("personality_no_aslr", call(135, 0x0040000))
import struct, time
nofile = ctypes.create_string_buffer(struct.pack("QQ", 64, 64), 16)
got = ctypes.create_string_buffer(16)
other = os.fork()
if other == 0:
    time.sleep(30)
    os._exit(0)
print("prlimit_own", call(302, 0, 7, ctypes.addressof(nofile), 0))
print("prlimit_read_other", call(302, other, 7, 0, ctypes.addressof(got)))
print("prlimit_set_other", call(302, other, 7, ctypes.addressof(nofile), 0))
print("prlimit_set_own_pid", call(302, os.getpid(), 7, ctypes.addressof(nofile), 0))
os.kill(other, 9)
os.waitpid(other, 0)
)PY");
  for (const char* refused :
       {"clone_newuser", "clone_newnet", "socket_packet", "socket_inet_raw", "socket_inet6_raw",
        "socket_netlink_audit", "socket_alg", "socket_vsock", "socket_unix_high_bits",
        "personality_no_aslr", "prlimit_set_other", "prlimit_set_own_pid"}) {
    EXPECT_THAT(out, HasSubstr(std::string(refused) + " -1 133\n")) << out;
  }
  EXPECT_THAT(out, HasSubstr("clone3 -1 ENOSYS\n"));
  EXPECT_THAT(out, HasSubstr("fork 7\n"));
  EXPECT_THAT(out, HasSubstr("thread ok\n"));
  EXPECT_THAT(out, HasSubstr("posix_spawn 0\n"));
  for (const char* allowed :
       {"socket_unix", "socket_inet_stream", "socket_inet6_dgram", "socket_inet_stream_cloexec",
        "socket_netlink_route", "personality_query", "prlimit_own", "prlimit_read_other"}) {
    EXPECT_THAT(out, HasSubstr(std::string(allowed) + " ok\n")) << out;
  }
}

TEST_F(SeccompTest, LogDeniedLetsDeniedCallsThrough) {
  // KEYCTL_GET_KEYRING_ID of the session keyring: EPERM under the filter, an id when allowed.
  const std::string code =
      "print('keyctl', call(250, 0, -3, 0))\n"
      "print('Seccomp', [l.split()[1] for l in open('/proc/self/status') "
      "if l.startswith('Seccomp:')][0])\n";
  EXPECT_THAT(Probe(Executor(), code), HasSubstr("keyctl -1 EPERM\n"));
  std::string logged = Probe(Executor(), code, /*log_denied=*/true);
  EXPECT_THAT(logged, HasSubstr("keyctl ok\n"));
  EXPECT_THAT(logged, HasSubstr("Seccomp 2\n"));  // still filtered, only not enforcing
}

// A setuid-root binary must run with the sandbox user's ids. To read its ids while it runs, it
// is started with stdout on a pipe that is already full, so it blocks in its first write (its
// --help) after execve has set its credentials; /proc/<pid>/status then shows them. (No
// new privileges, the securebits, and the unmapped host root owning the file each suffice.)
TEST_F(SeccompTest, SetuidBinaryGainsNothing) {
  std::string out = Probe(Executor(), R"PY(
import fcntl, stat, subprocess, time
path = next(p for p in ("/usr/bin/su", "/usr/bin/mount", "/usr/bin/passwd", "/usr/bin/chfn")
            if os.path.exists(p) and os.stat(p).st_mode & stat.S_ISUID)
r, w = os.pipe()
flags = fcntl.fcntl(w, fcntl.F_GETFL)
fcntl.fcntl(w, fcntl.F_SETFL, flags | os.O_NONBLOCK)
try:
    while True:
        os.write(w, b"x" * 4096)
except BlockingIOError:
    pass
fcntl.fcntl(w, fcntl.F_SETFL, flags)
p = subprocess.Popen([path, "--help"], stdin=subprocess.DEVNULL, stdout=w, stderr=w)
deadline = time.monotonic() + 5
while os.readlink(f"/proc/{p.pid}/exe") != path and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.1)
status = open(f"/proc/{p.pid}/status").read()
ids = [l.split()[1:] for l in status.splitlines() if l.startswith(("Uid:", "Gid:"))]
print("setuid", os.readlink(f"/proc/{p.pid}/exe") == path, p.poll() is None, ids)
p.kill(); p.wait()
)PY");
  EXPECT_THAT(out, HasSubstr("setuid True True [['65532', '65532', '65532', '65532'], "
                             "['65532', '65532', '65532', '65532']]\n"));
}

}  // namespace
}  // namespace ci::testing_support
