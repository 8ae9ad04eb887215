"""A throwaway CA and a server certificate for 127.0.0.1/localhost, made with the openssl CLI."""

import os
import subprocess


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_certs(directory):
    """Write ca.crt, server.crt and server.key into directory; return their paths."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "7",
             "-subj", "/CN=fake-kubernetes-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=kube-apiserver", cwd=directory)
    with open(os.path.join(directory, "server.ext"), "w") as f:
        # Go's TLS verification ignores the CN: the addresses must be SANs.
        f.write("subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost,DNS:kubernetes.default.svc\n"
                "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.crt", "-days", "7", "-extfile", "server.ext",
             cwd=directory)
    return tuple(os.path.join(directory, n) for n in ("ca.crt", "server.crt", "server.key"))
