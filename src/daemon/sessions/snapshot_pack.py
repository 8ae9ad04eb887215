# A session snapshot's first step, in the sandbox (sandbox_archive.h): names on stderr, as one
# JSON line, the processes that will not come back (all but init, this one and the session's
# interpreter and relays), then becomes the `tar` that writes the writable trees' contents to
# stdout.
import json
import os

OURS = {1, os.getpid(), os.getppid()}
processes = []
for entry in os.listdir('/proc'):
    if not entry.isdigit() or int(entry) in OURS:
        continue
    try:
        with open('/proc/%s/comm' % entry) as f:
            name = f.read().strip()
        with open('/proc/%s/cmdline' % entry, 'rb') as f:
            command = f.read().replace(b'\0', b' ').strip()
    except OSError:
        continue
    # The session's interpreter and its relays; the local backend's shim (pid 2).
    if name in ('ci-interpreter', 'ci-relay') or command.startswith(b'code-interpreter ') \
            or not command:
        continue
    processes.append('process %s: %s' % (entry, command.decode(errors='replace')[:200]))
os.write(2, (json.dumps(processes) + '\n').encode())
# The trees' contents, not the trees: their own modes and owners are the new sandbox's.
names = b''
for root in ('workspace', 'tmp', 'home/user'):
    if os.path.isdir('/' + root):
        for child in sorted(os.listdir('/' + root)):
            names += b'%s/%s\0' % (root.encode(), os.fsencode(child))
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    os.write(w, names)
    os._exit(0)
os.close(w)
os.set_inheritable(r, True)
os.execvp('tar', ['tar', '--create', '--file=-', '--sparse', '--numeric-owner', '--directory=/',
                  '--null', '--files-from=/dev/fd/%d' % r])
