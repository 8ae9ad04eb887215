#!/usr/bin/env python3
"""A fake Docker registry (Registry HTTP API v2, read-only, plain HTTP) serving one tiny image
generated here, for the image pull tests: dockerd treats registries on 127.0.0.0/8 as insecure,
so `127.0.0.1:<port>/<repo>:<tag>` pulls over plain HTTP.

  GET  /v2/                          200, Docker-Distribution-API-Version: registry/2.0
  HEAD|GET /v2/<repo>/manifests/<ref> the schema2 manifest (by tag or by its digest)
  HEAD|GET /v2/<repo>/blobs/<digest>  the config and the gzip layers
  anything else                      404 with the registry's {"errors": [...]} body

The image: one layer with a few small files (hello.txt, etc/os-release) plus `--layer-kb` KiB
of incompressible bytes in a second layer, so the pull has something to count. `--delay-ms`
sleeps between 64 KiB pieces of a blob (slow registries, progress lines).

Prints `listening on <port>` (and, with --print-digest, `digest <manifest digest>`) on stdout
once it serves. Python stdlib only."""

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_TYPE = "application/vnd.docker.container.image.v1+json"
LAYER_TYPE = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tar(files):
    """An uncompressed tar of {path: bytes}, fixed mtimes so the digests are stable."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = sorted({os.path.dirname(p) for p in files if os.path.dirname(p)})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            info.mtime = 1700000000
            tar.addfile(info)
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 1700000000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def build_image(layer_kb):
    """(manifest bytes, {digest: blob bytes}) of a tiny linux/amd64 image."""
    layers = [layer_tar({"hello.txt": b"hello from the fake registry\n",
                         "etc/os-release": b'NAME="tiny"\nID=tiny\n'})]
    if layer_kb > 0:
        # Random bytes do not compress: the download is as large as asked.
        layers.append(layer_tar({"data/blob.bin": os.urandom(layer_kb << 10)}))
    blobs = {}
    descriptors = []
    diff_ids = []
    for raw in layers:
        gz = gzip.compress(raw, mtime=0)
        blobs[sha256(gz)] = gz
        descriptors.append({"mediaType": LAYER_TYPE, "size": len(gz), "digest": sha256(gz)})
        diff_ids.append(sha256(raw))
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "created": "2023-11-14T22:13:20Z",
        "config": {"Cmd": ["/hello"], "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created": "2023-11-14T22:13:20Z", "created_by": "fake_registry.py"}
                    for _ in layers],
    }, sort_keys=True).encode()
    blobs[sha256(config)] = config
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "size": len(config), "digest": sha256(config)},
        "layers": descriptors,
    }, indent=3).encode()
    return manifest, blobs


class Registry(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-registry/1"
    # Set by main():
    repo = "tiny"
    tags = ("v1",)
    manifest = b""
    blobs = {}
    delay = 0.0

    def log_message(self, fmt, *args):
        if os.environ.get("FAKE_REGISTRY_DEBUG"):
            sys.stderr.write("fake registry: " + fmt % args + "\n")

    def error(self, status, code, message):
        body = json.dumps({"errors": [{"code": code, "message": message, "detail": None}]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send(self, data, content_type, digest=None):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        if digest:
            self.send_header("Docker-Content-Digest", digest)
            self.send_header("ETag", f'"{digest}"')
        self.end_headers()
        if self.command == "HEAD":
            return
        step = 64 << 10
        for i in range(0, len(data), step):
            self.wfile.write(data[i:i + step])
            self.wfile.flush()
            if self.delay:
                time.sleep(self.delay)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path in ("/v2", "/v2/"):
            return self.send(b"{}", "application/json")
        m = re.fullmatch(r"/v2/(.+)/(manifests|blobs)/([^/]+)", path)
        if not m:
            return self.error(404, "NOT_FOUND", "not found")
        name, kind, ref = m.groups()
        if name != self.repo:
            return self.error(404, "NAME_UNKNOWN", f"repository name not known to registry: {name}")
        if kind == "manifests":
            digest = sha256(self.manifest)
            if ref not in self.tags and ref != digest:
                return self.error(404, "MANIFEST_UNKNOWN", f"manifest unknown: {ref}")
            return self.send(self.manifest, MANIFEST_TYPE, digest)
        blob = self.blobs.get(ref)
        if blob is None:
            return self.error(404, "BLOB_UNKNOWN", f"blob unknown to registry: {ref}")
        return self.send(blob, "application/octet-stream", ref)

    do_HEAD = do_GET


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--repo", default="tiny")
    ap.add_argument("--tag", action="append", help="tags served (default v1)")
    ap.add_argument("--layer-kb", type=int, default=512)
    ap.add_argument("--delay-ms", type=int, default=0, help="sleep between 64 KiB blob pieces")
    ap.add_argument("--print-digest", action="store_true")
    args = ap.parse_args()
    manifest, blobs = build_image(args.layer_kb)
    Registry.repo = args.repo
    Registry.tags = tuple(args.tag or ["v1"])
    Registry.manifest = manifest
    Registry.blobs = blobs
    Registry.delay = args.delay_ms / 1000.0
    server = ThreadingHTTPServer((args.host, args.port), Registry)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    if args.print_digest:
        print(f"digest {sha256(manifest)}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
