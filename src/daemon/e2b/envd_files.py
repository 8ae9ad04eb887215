# envd's file operations, run in an E2B sandbox as its user (docs/e2b.md "Files"): the daemon
# starts `python3 -I -S -c <this> OP ARGS...` and reads one JSON line, {"ok": ...} or
# {"error": {"code", "message"}}, then for `read` the file's bytes and for `watch` one event per
# line. Running inside, as the user, nothing outside the sandbox can be reached whatever a path
# or a symlink says, and the kernel's permissions decide what may be written.
import errno
import grp
import json
import os
import pwd
import shutil
import signal
import stat
import sys
import time

HOME = "/home/user"
# Uploads go to ".NAME.upload-PID" first; watches do not report those names.
UPLOAD_MARK = ".upload-"


class Failure(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def fail_from(e, path):
    """An OSError as envd's code: what the SDK reads (not_found, already_exists...)."""
    codes = {
        errno.ENOENT: "not_found",
        errno.ENOTDIR: "not_found",
        errno.EEXIST: "already_exists",
        errno.ENOTEMPTY: "already_exists",
        errno.EACCES: "permission_denied",
        errno.EPERM: "permission_denied",
        errno.EROFS: "permission_denied",
        errno.ENOSPC: "no_space",
        errno.EDQUOT: "no_space",
        errno.EFBIG: "no_space",
        errno.ELOOP: "failed_precondition",
        errno.EISDIR: "invalid_argument",
        errno.ENAMETOOLONG: "invalid_argument",
        errno.EXDEV: "invalid_argument",
    }
    why = os.strerror(e.errno) if e.errno else str(e)
    return Failure(codes.get(e.errno, "internal"), "%s: %s" % (path, why))


def resolve(path):
    if path == "~" or path.startswith("~/"):
        path = HOME + path[1:]
    if not path.startswith("/"):
        path = os.path.join(HOME, path)
    return os.path.normpath(path).replace("//", "/")


# Go's FileMode.String() letters for a type, then for the setuid, setgid and sticky bits.
TYPE_LETTERS = [(stat.S_ISDIR, "d"), (stat.S_ISLNK, "L"), (stat.S_ISFIFO, "p"),
                (stat.S_ISSOCK, "S"), (stat.S_ISCHR, "Dc"), (stat.S_ISBLK, "D")]
BIT_LETTERS = [(stat.S_ISUID, "u"), (stat.S_ISGID, "g"), (stat.S_ISVTX, "t")]


def permissions(mode):
    """Go's FileMode.String(), as envd reports it."""
    kind = next((letter for is_kind, letter in TYPE_LETTERS if is_kind(mode)), "")
    kind += "".join(letter for bit, letter in BIT_LETTERS if mode & bit)
    rwx = "".join(c if mode & (1 << (8 - i)) else "-" for i, c in enumerate("rwxrwxrwx"))
    return (kind or "-") + rwx


def name_of(table, n):
    try:
        return table(n)[0]
    except KeyError:
        return str(n)


def rfc3339(ns):
    seconds, nanos = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + ".%09dZ" % nanos


def text(s):
    """A name as JSON can carry it: bytes that are not UTF-8 become U+FFFD."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def entry(path, st=None):
    st = st or os.lstat(path)
    kind = "FILE_TYPE_UNSPECIFIED"
    if stat.S_ISREG(st.st_mode):
        kind = "FILE_TYPE_FILE"
    elif stat.S_ISDIR(st.st_mode):
        kind = "FILE_TYPE_DIRECTORY"
    elif stat.S_ISLNK(st.st_mode):
        kind = "FILE_TYPE_SYMLINK"
    info = {
        "name": text(os.path.basename(path) or "/"),
        "type": kind,
        "path": text(path),
        "size": st.st_size,
        "mode": stat.S_IMODE(st.st_mode) & 0o777,
        "permissions": permissions(st.st_mode),
        "owner": name_of(pwd.getpwuid, st.st_uid),
        "group": name_of(grp.getgrgid, st.st_gid),
        "modifiedTime": rfc3339(st.st_mtime_ns),
    }
    if stat.S_ISLNK(st.st_mode):
        info["symlinkTarget"] = text(os.path.realpath(path))
    return info


def answer(value):
    sys.stdout.buffer.write(json.dumps({"ok": value}).encode() + b"\n")
    sys.stdout.buffer.flush()


def op_stat(path):
    answer({"entry": entry(resolve(path))})


def op_list(path, depth):
    top = resolve(path)
    real = os.path.realpath(top)
    if not os.path.isdir(real):
        os.stat(real)  # not_found when it is not there at all
        raise Failure("invalid_argument", "%s: not a directory" % top)
    entries = []

    def walk(d, level):
        with os.scandir(d) as it:
            for e in sorted(it, key=lambda e: e.name):
                entries.append(entry(e.path, e.stat(follow_symlinks=False)))
                if level < depth and e.is_dir(follow_symlinks=False):
                    walk(e.path, level + 1)

    walk(top, 1)  # entries named under the path asked for, as the user sees it
    answer({"entries": entries})


def op_mkdir(path):
    p = resolve(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        os.makedirs(p)
        answer({"entry": entry(p)})
        return
    if stat.S_ISDIR(st.st_mode):
        raise Failure("already_exists", "%s: the directory exists" % p)
    raise Failure("invalid_argument", "%s: exists and is not a directory" % p)


def op_move(source, destination):
    src, dst = resolve(source), resolve(destination)
    os.lstat(src)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.rename(src, dst)
    answer({"entry": entry(dst)})


def op_remove(path):
    p = resolve(path)
    st = os.lstat(p)
    if stat.S_ISDIR(st.st_mode):
        try:
            shutil.rmtree(p)
        except OSError as e:  # its filename is relative to the directory it was in
            raise fail_from(e, p)
    else:
        os.unlink(p)
    answer({})


def op_read(path):
    p = resolve(path)
    fd = os.open(p, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise Failure("invalid_argument", "%s: is a directory" % p)
    if not stat.S_ISREG(st.st_mode):
        raise Failure("invalid_argument", "%s: not a regular file" % p)
    os.set_blocking(fd, True)
    answer({"size": st.st_size})
    left, offset = st.st_size, 0
    while left > 0:  # exactly the size announced: the daemon cuts the response if it gets less
        try:
            n = os.sendfile(1, fd, offset, min(left, 1 << 20))
        except OSError:
            data = os.pread(fd, min(left, 1 << 20), offset)
            n = len(data)
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        if n == 0:
            break
        offset += n
        left -= n


def op_write(path, encoding):
    """stdin to the file, through a temporary file renamed over it: a failed upload leaves the
    old file whole (and no partial new one)."""
    p = resolve(path)
    parent = os.path.dirname(p)
    os.makedirs(parent, exist_ok=True)
    if os.path.isdir(p):
        raise Failure("invalid_argument", "%s: is a directory" % p)
    tmp = os.path.join(parent, ".%s%s%d" % (os.path.basename(p)[:200], UPLOAD_MARK, os.getpid()))
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        raise fail_from(e, p)
    try:
        inflate = None
        if encoding == "gzip":
            import zlib

            inflate = zlib.decompressobj(wbits=31)
        with os.fdopen(fd, "wb") as out:
            while True:
                chunk = sys.stdin.buffer.read1(1 << 20)
                if not chunk:
                    break
                if inflate is not None:
                    try:
                        chunk = inflate.decompress(chunk)
                    except zlib.error as e:
                        raise Failure("invalid_argument", "the gzip body is corrupt: %s" % e)
                out.write(chunk)
            if inflate is not None:
                if not inflate.eof:
                    raise Failure("invalid_argument", "the gzip body ends early")
                out.write(inflate.flush())
        os.rename(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    answer({"path": text(p), "name": text(os.path.basename(p)), "type": "file"})


def is_upload_temp(name):
    head, mark, pid = name.rpartition(UPLOAD_MARK)
    return head.startswith(".") and mark and pid.isdigit()


def op_watch(path, recursive, keepalive):
    """inotify through libc (no module for it in the standard library): one JSON line per
    event, named relative to the watched directory, and {} after `keepalive` quiet seconds,
    until the daemon kills it."""
    import ctypes
    import select
    import struct

    top = resolve(path)
    if not os.path.isdir(top):
        os.stat(top)
        raise Failure("invalid_argument", "%s: not a directory" % top)
    libc = ctypes.CDLL(None, use_errno=True)
    ifd = libc.inotify_init1(os.O_CLOEXEC)
    if ifd < 0:
        e = ctypes.get_errno()
        if e == errno.EPERM:
            raise Failure(
                "failed_precondition",
                "watching is refused by this sandbox's seccomp profile (inotify is not allowed)",
            )
        raise fail_from(OSError(e, os.strerror(e)), top)
    mask = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200  # modify attrib moved_from/to create delete
    watches = {}

    def add(d):
        wd = libc.inotify_add_watch(ifd, os.fsencode(d), mask | 0x1000000)  # IN_ONLYDIR
        if wd >= 0:
            watches[wd] = d
        elif d == top:
            e = ctypes.get_errno()
            raise fail_from(OSError(e, os.strerror(e)), top)

    add(top)
    if recursive:
        for d, subdirs, _ in os.walk(top):
            for s in subdirs:
                add(os.path.join(d, s))
    answer({})
    kinds = [
        (0x100 | 0x80, "EVENT_TYPE_CREATE"),  # created, or moved in
        (0x40, "EVENT_TYPE_RENAME"),  # moved out
        (0x4, "EVENT_TYPE_CHMOD"),
        (0x2, "EVENT_TYPE_WRITE"),
        (0x200, "EVENT_TYPE_REMOVE"),
    ]
    out = sys.stdout.buffer
    while True:
        if not select.select([ifd], [], [], keepalive)[0]:
            out.write(b"{}\n")
            out.flush()
            continue
        buf = os.read(ifd, 65536)
        at = 0
        while at < len(buf):
            wd, ev, _, size = struct.unpack_from("iIII", buf, at)
            name = buf[at + 16 : at + 16 + size].split(b"\0", 1)[0].decode(errors="surrogateescape")
            at += 16 + size
            d = watches.get(wd)
            if d is None or not name or is_upload_temp(name):
                continue
            full = os.path.join(d, name)
            if recursive and ev & 0x40000000 and ev & (0x100 | 0x80):  # a new directory
                add(full)
            rel = os.path.relpath(full, top)
            for bit, kind in kinds:
                if ev & bit:
                    out.write(json.dumps({"name": text(rel), "type": kind}).encode() + b"\n")
        out.flush()


OPS = {
    "stat": lambda a: op_stat(a[0]),
    "list": lambda a: op_list(a[0], max(1, int(a[1]))),
    "mkdir": lambda a: op_mkdir(a[0]),
    "move": lambda a: op_move(a[0], a[1]),
    "remove": lambda a: op_remove(a[0]),
    "read": lambda a: op_read(a[0]),
    "write": lambda a: op_write(a[0], a[1]),
    "watch": lambda a: op_watch(a[0], a[1] == "1", int(a[2])),
}


def terminated(signum, frame):
    raise SystemExit(1)  # unwinds: an upload drops its temporary file


def main():
    signal.signal(signal.SIGTERM, terminated)
    op, args = sys.argv[1], sys.argv[2:]
    target = args[0] if args else ""
    try:
        OPS[op](args)
    except Failure as f:
        error = {"code": f.code, "message": text(str(f))}
    except BrokenPipeError:
        return
    except OSError as e:
        f = fail_from(e, e.filename or target)
        error = {"code": f.code, "message": text(str(f))}
    else:
        return
    sys.stdout.buffer.write(json.dumps({"error": error}).encode() + b"\n")


main()
