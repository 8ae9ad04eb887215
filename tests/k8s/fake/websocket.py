"""RFC 6455 framing, both ends: the server side of the exec stream and a small client for tests.

Only what the exec subresource needs: binary/close/ping/pong frames, fragmented messages
reassembled, no extensions (the Kubernetes servers negotiate none either).
"""

import base64
import hashlib
import os
import struct

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def apply_mask(data, mask):
    """XOR with the repeating 4-byte mask, as one big-integer operation (a byte loop is too slow
    for the megabytes `kubectl cp` sends)."""
    n = len(data)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(key, "little")).to_bytes(n, "little")


def accept_key(key):
    """The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


class ProtocolError(Exception):
    pass


def _read_exact(stream, n):
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError("connection closed inside a WebSocket frame")
        data += chunk
    return data


def read_frame(stream, expect_masked):
    """One frame as (fin, opcode, payload). expect_masked: True on the server (RFC 6455 5.1)."""
    b0, b1 = _read_exact(stream, 2)
    if b0 & 0x70:
        raise ProtocolError("reserved bits set without a negotiated extension")
    fin, opcode, masked, length = bool(b0 & 0x80), b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
    if masked != expect_masked:
        raise ProtocolError("client frames must be masked, server frames must not")
    if length == 126:
        (length,) = struct.unpack("!H", _read_exact(stream, 2))
    elif length == 127:
        (length,) = struct.unpack("!Q", _read_exact(stream, 8))
    mask = _read_exact(stream, 4) if masked else None
    payload = _read_exact(stream, length)
    if mask:
        payload = apply_mask(payload, mask)
    return fin, opcode, payload


def read_message(stream, expect_masked):
    """One whole message (continuations joined) as (opcode, payload); control frames come alone."""
    fin, opcode, payload = read_frame(stream, expect_masked)
    if opcode >= OP_CLOSE:
        return opcode, payload
    while not fin:
        fin, cont_op, more = read_frame(stream, expect_masked)
        if cont_op >= OP_CLOSE:
            # Control frames may be interleaved in a fragmented message; none matter mid-message
            # here except close, which ends everything.
            if cont_op == OP_CLOSE:
                return cont_op, more
            continue
        payload += more
    return opcode, payload


def encode_frame(opcode, payload, masked):
    header = bytes([0x80 | opcode])
    mask_bit = 0x80 if masked else 0
    n = len(payload)
    if n < 126:
        header += bytes([mask_bit | n])
    elif n < 1 << 16:
        header += bytes([mask_bit | 126]) + struct.pack("!H", n)
    else:
        header += bytes([mask_bit | 127]) + struct.pack("!Q", n)
    if not masked:
        return header + payload
    mask = os.urandom(4)
    return header + mask + apply_mask(payload, mask)


def close_payload(code, reason=""):
    return struct.pack("!H", code) + reason.encode()


def parse_close(payload):
    """(code, reason) of a close frame; 1005 (no status) when the payload is empty."""
    if len(payload) < 2:
        return 1005, ""
    return struct.unpack("!H", payload[:2])[0], payload[2:].decode(errors="replace")
