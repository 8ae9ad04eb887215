"""One TLS connection shared by threads. An exec or attach stream reads the client's frames on
one thread while others write output; OpenSSL's SSL object is not thread-safe and CPython drops
the GIL inside SSL_read and SSL_write, so the two raced and corrupted the heap (the fake aborted
with "malloc(): unsorted double linked list corrupted" in a CI run). Here every SSL call holds
one lock, on a non-blocking socket, and a thread waits for the socket outside it: a writer that
held it while the peer's window was full would keep the reader from the bytes that free it."""

import io
import select
import ssl
import threading

_RETRY = (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError)


class LockedTls:
    def __init__(self, sock):
        self._sock = sock
        self._lock = threading.Lock()  # held for one SSL call
        self._write_lock = threading.Lock()  # held for one sendall: a pending write goes first
        sock.setblocking(False)

    def fileno(self):
        return self._sock.fileno()

    def _wait(self, writable):
        # Bounded: a writer's SSL_write may pull a record off the socket while the reader
        # waits here, leaving it decrypted in OpenSSL's buffer with nothing left to select on.
        # poll, not select: a fake with many pods attached has descriptors past 1023.
        poller = select.poll()
        poller.register(self._sock, select.POLLOUT if writable else select.POLLIN)
        poller.poll(500)

    def recv_into(self, buffer):
        while True:
            with self._lock:
                try:
                    return self._sock.recv_into(buffer)
                except _RETRY as e:
                    writable = isinstance(e, ssl.SSLWantWriteError)
            self._wait(writable)

    def sendall(self, data):
        view = memoryview(data).cast("B")
        with self._write_lock:
            while view:
                with self._lock:
                    try:
                        view = view[self._sock.send(view):]
                        continue
                    except _RETRY as e:
                        writable = not isinstance(e, ssl.SSLWantReadError)
                # Retried with the same bytes (CPython sets ACCEPT_MOVING_WRITE_BUFFER);
                # reads may run in between, as in any event loop.
                self._wait(writable)

    def close(self):
        with self._lock:
            self._sock.close()

    def reader(self):
        """A buffered binary file reading this connection (a handler's rfile)."""
        return io.BufferedReader(_Reader(self))

    def writer(self):
        """An unbuffered binary file writing this connection (a handler's wfile)."""
        return _Writer(self)


class _Reader(io.RawIOBase):
    def __init__(self, connection):
        self._connection = connection

    def readable(self):
        return True

    def readinto(self, buffer):
        return self._connection.recv_into(buffer)


class _Writer(io.RawIOBase):
    def __init__(self, connection):
        self._connection = connection

    def writable(self):
        return True

    def write(self, data):
        self._connection.sendall(data)
        return len(data)
