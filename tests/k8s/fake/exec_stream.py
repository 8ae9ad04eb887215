"""The exec subresource after the WebSocket upgrade: channel-multiplexed stdin/stdout/stderr and
the channel-3 Status, as the kubelet's remotecommand server and the apiserver's v5 translator
speak them (apimachinery util/remotecommand, kubelet cri/streaming/remotecommand)."""

import json
import os
import threading

from . import websocket as ws
from .sandbox import kill_exec

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
V5, V4 = "v5.channel.k8s.io", "v4.channel.k8s.io"


def exit_status(returncode):
    """The channel-3 Status for a finished command (kubelet remotecommand/exec.go)."""
    code = 128 - returncode if returncode < 0 else returncode  # killed by a signal: 128+sig
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command "
                       f"[...], exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def internal_error(message):
    return {"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError",
            "details": {"causes": [{"message": message}]}, "code": 500}


class ExecStream:
    def __init__(self, rfile, sock, protocol):
        self.rfile, self.sock, self.protocol = rfile, sock, protocol
        self.write_lock = threading.Lock()
        self.peer_closed = threading.Event()
        self.close_sent = False  # a side sends one close frame at most (RFC 6455 5.5.1)

    def send(self, opcode, payload):
        with self.write_lock:
            self.sock.sendall(ws.encode_frame(opcode, payload, masked=False))

    def send_channel(self, channel, data):
        self.send(ws.OP_BINARY, bytes([channel]) + data)

    def run(self, start, want_stdin, want_stdout, want_stderr):
        """start() -> Popen or a string (an error before the command ran)."""
        # The "streams are ready" message: an empty payload on the lowest writable channel.
        self.send_channel(STDOUT if want_stdout else STDERR if want_stderr else ERROR, b"")
        proc = start()
        if isinstance(proc, str):
            self.send_channel(ERROR, json.dumps(internal_error(proc)).encode())
            self._close()
            return
        pumps = []
        for channel, pipe in ((STDOUT, proc.stdout), (STDERR, proc.stderr)):
            if pipe is not None:
                t = threading.Thread(target=self._pump, args=(channel, pipe), daemon=True)
                t.start()
                pumps.append(t)
        reader = threading.Thread(target=self._read_client, args=(proc,), daemon=True)
        reader.start()
        code = proc.wait()
        for t in pumps:
            t.join()
        if self.peer_closed.is_set():
            return  # the client went away; nobody to tell
        self.send_channel(ERROR, json.dumps(exit_status(code)).encode())
        self._close()
        reader.join(timeout=15)  # the client answers the close frame; then we hang up

    def _pump(self, channel, pipe):
        """Forward output as it is produced: one message per read, never waiting to fill."""
        fd = pipe.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            try:
                self.send_channel(channel, data)
            except OSError:
                break
        pipe.close()

    def _read_client(self, proc):
        stdin = proc.stdin
        try:
            while True:
                opcode, payload = ws.read_message(self.rfile, expect_masked=True)
                if opcode == ws.OP_CLOSE:
                    if not self.peer_closed.is_set() and proc.poll() is None:
                        # The client hung up before the command finished: kill it, as containerd
                        # does when the stream's context is cancelled.
                        self.peer_closed.set()
                        kill_exec(proc)
                    self._close(payload[:2])  # echo the code, unless we closed first
                    return
                if opcode == ws.OP_PING:
                    self.send(ws.OP_PONG, payload)
                    continue
                # Text frames carry channels too: the Go servers' websocket.Message.Receive takes
                # both, and the Python client sends str stdin as text.
                if opcode not in (ws.OP_BINARY, ws.OP_TEXT) or not payload:
                    continue
                channel, data = payload[0], payload[1:]
                if channel == STDIN and stdin is not None and data:
                    try:
                        stdin.write(data)
                        stdin.flush()
                    except (BrokenPipeError, ValueError):
                        pass  # the command stopped reading; the client may still send
                elif channel == CLOSE and self.protocol == V5 and data[:1] == bytes([STDIN]):
                    if stdin is not None:
                        stdin.close()
                        stdin = None
        except (EOFError, OSError, ws.ProtocolError):
            # Connection gone without a close frame.
            if proc.poll() is None:
                self.peer_closed.set()
                kill_exec(proc)
        finally:
            if stdin is not None:
                try:
                    stdin.close()
                except OSError:
                    pass

    def _close(self, payload=None):
        with self.write_lock:
            if self.close_sent:
                return
            self.close_sent = True
            try:
                frame = payload if payload is not None else ws.close_payload(1000)
                self.sock.sendall(ws.encode_frame(ws.OP_CLOSE, frame, masked=False))
            except OSError:
                pass


class AttachStream(ExecStream):
    """The attach subresource: the container's command's stdio as it is from the moment of
    attaching (containerd keeps no history), stdin only to a container with `stdin: true`. It
    ends with a Success status when the command's output ends (kubelet ServeAttach); a client
    that hangs up leaves the command alone, and with `stdinOnce: true` closes its stdin, as its
    stdin's end (v5's close signal) does."""

    def attach(self, container, want_stdin, want_stdout, want_stderr):
        self.send_channel(STDOUT if want_stdout else STDERR if want_stderr else ERROR, b"")
        wanted = {STDOUT: want_stdout, STDERR: want_stderr}

        def forward(channel, data):
            if wanted[channel] and not self.peer_closed.is_set():
                try:
                    self.send_channel(channel, data)
                except OSError:
                    self.peer_closed.set()

        attached = container.attach(forward)
        reader = threading.Thread(target=self._read_attached, args=(container, want_stdin),
                                  daemon=True)
        reader.start()
        if attached:
            while not container.output_done.wait(0.1) and not self.peer_closed.is_set():
                pass
            container.detach(forward)
        if self.peer_closed.is_set():
            return
        self.send_channel(ERROR, json.dumps({"metadata": {}, "status": "Success"}).encode())
        self._close()
        reader.join(timeout=15)

    def _read_attached(self, container, want_stdin):
        stdin_once = bool(container.spec.get("stdinOnce"))
        try:
            while True:
                opcode, payload = ws.read_message(self.rfile, expect_masked=True)
                if opcode == ws.OP_CLOSE:
                    self.peer_closed.set()
                    self._close(payload[:2])
                    return
                if opcode == ws.OP_PING:
                    self.send(ws.OP_PONG, payload)
                    continue
                if opcode not in (ws.OP_BINARY, ws.OP_TEXT) or not payload:
                    continue
                channel, data = payload[0], payload[1:]
                if channel == STDIN and want_stdin and data:
                    container.write_stdin(data)
                elif channel == CLOSE and self.protocol == V5 and data[:1] == bytes([STDIN]):
                    want_stdin = False
                    if stdin_once:
                        container.close_stdin()
        except (EOFError, OSError, ws.ProtocolError):
            self.peer_closed.set()
        finally:
            if want_stdin and stdin_once:
                container.close_stdin()
