#!/usr/bin/env bash
# Makes a dockerd and the executor image available for the docker, e2e-docker and hostile-docker
# tests (scripts/test.sh runs it before `meson test`): starts dockerd when /_ping does not answer
# on $DOCKER_SOCK (no bridge, no iptables: sandboxes use network "none"), waits up to 30 s
# (printing its log on failure), then builds or reuses the image with
# packaging/executor-image/build.sh (a cold build bootstraps Debian 12, several minutes; the
# root is cached in /var/cache/code-interpreter).
#
# TLS (the client's tcp + TLS transport, DockerTlsTest): a test CA, a server certificate (SAN
# 127.0.0.1, localhost) and client certificates are generated with openssl into $TLS_DIR when
# missing, and dockerd also listens on tcp://127.0.0.1:$TLS_PORT with --tlsverify. A dockerd
# that this script started earlier without that listener (or with older certificates) is
# restarted once with it (its containers stop); one started otherwise is left alone and the TLS
# tests skip. $TLS_DIR/host names the listener once it answers. Layout of $TLS_DIR:
#   ca.pem, ca-key.pem, server-cert.pem, server-key.pem   the daemon's side
#   client/{ca,cert,key}.pem     a DOCKER_CERT_PATH that works
#   ca-only/ca.pem               no client certificate
#   wrong-ca/{ca,cert,key}.pem   a valid client certificate, but ca.pem is an unrelated CA
#
# Env: DOCKER_SOCK (/var/run/docker.sock), DOCKERD_LOG (/tmp/code-interpreter-dockerd.log),
#      IMAGE (code-interpreter-executor:latest), DOCKER_TLS_DIR (/tmp/code-interpreter-tls),
#      DOCKER_TLS_PORT (23760). Needs root to start dockerd.
set -euo pipefail
cd "$(dirname "$0")/../.."

SOCK="${DOCKER_SOCK:-/var/run/docker.sock}"
LOG="${DOCKERD_LOG:-/tmp/code-interpreter-dockerd.log}"
IMAGE="${IMAGE:-code-interpreter-executor:latest}"
TLS_DIR="${DOCKER_TLS_DIR:-/tmp/code-interpreter-tls}"
TLS_PORT="${DOCKER_TLS_PORT:-23760}"
# What this script runs; a running dockerd whose command line starts so is ours to restart.
DOCKERD=(dockerd --host "unix://$SOCK" --bridge=none --iptables=false --ip6tables=false)

# One run at a time: concurrent test runs share the daemon (and a restart).
exec 9>"/tmp/code-interpreter-dockerd.lock"
flock 9

ping_ok() { curl -sf --max-time 2 --unix-socket "$SOCK" http://docker/_ping >/dev/null 2>&1; }
tls_ok() {
  curl -sf --max-time 2 --cacert "$TLS_DIR/client/ca.pem" --cert "$TLS_DIR/client/cert.pem" \
    --key "$TLS_DIR/client/key.pem" "https://127.0.0.1:$TLS_PORT/_ping" >/dev/null 2>&1
}

# The test PKI, regenerated whole when a file is missing (EC P-256, ten years).
make_certs() {
  local f missing=0
  for f in ca.pem ca-key.pem server-cert.pem server-key.pem client/ca.pem client/cert.pem \
    client/key.pem ca-only/ca.pem wrong-ca/ca.pem wrong-ca/cert.pem wrong-ca/key.pem; do
    [ -f "$TLS_DIR/$f" ] || missing=1
  done
  [ $missing -eq 0 ] && return 0
  command -v openssl >/dev/null || { echo "openssl is not installed" >&2; return 1; }
  echo "generating the TLS test certificates in $TLS_DIR" >&2
  local tmp
  tmp=$(mktemp -d "${TLS_DIR}.XXXXXX")
  (
    cd "$tmp"
    mkdir client ca-only wrong-ca
    key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
    ca() {  # ca cert, ca key, CN
      key "$2"
      openssl req -x509 -new -key "$2" -days 3650 -subj "/CN=$3" -out "$1" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
    }
    leaf() {  # cert, key, CN, extensions
      key "$2"
      openssl req -new -key "$2" -subj "/CN=$3" -out leaf.csr
      printf '%b' "$4" >leaf.ext
      openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 3650 \
        -extfile leaf.ext -out "$1" 2>/dev/null
    }
    ca ca.pem ca-key.pem "code-interpreter test CA"
    leaf server-cert.pem server-key.pem localhost \
      "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    leaf client/cert.pem client/key.pem client "extendedKeyUsage=clientAuth\n"
    cp ca.pem client/ca.pem
    cp ca.pem ca-only/ca.pem
    cp client/cert.pem client/key.pem wrong-ca/
    ca wrong-ca/ca.pem other-ca-key.pem "an unrelated CA"
    rm -f leaf.csr leaf.ext ca.srl other-ca-key.pem
  )
  chmod 700 "$tmp"
  rm -rf "$TLS_DIR"
  mv "$tmp" "$TLS_DIR"
}

start_dockerd() {
  command -v dockerd >/dev/null || { echo "dockerd is not installed (apt-get install docker.io)" >&2; exit 1; }
  local tls=()
  if [ -f "$TLS_DIR/server-key.pem" ]; then
    tls=(--host "tcp://127.0.0.1:$TLS_PORT" --tlsverify --tlscacert "$TLS_DIR/ca.pem"
      --tlscert "$TLS_DIR/server-cert.pem" --tlskey "$TLS_DIR/server-key.pem")
  fi
  echo "starting dockerd (log: $LOG)" >&2
  # setsid: the daemon outlives this script and the test run; it is not ours to stop. 9>&-: it
  # must not hold the lock.
  setsid "${DOCKERD[@]}" "${tls[@]}" >"$LOG" 2>&1 </dev/null 9>&- &
  for _ in $(seq 60); do
    ping_ok && break
    sleep 0.5
  done
  if ! ping_ok; then
    echo "dockerd did not answer on $SOCK within 30 s; its log:" >&2
    tail -n 50 "$LOG" >&2 || true
    exit 1
  fi
}

# The pid of the dockerd serving $SOCK when this script started it, else nothing.
our_dockerd() {
  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null) || return 0
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
  [[ "$(tr '\0' ' ' <"/proc/$pid/cmdline")" == "${DOCKERD[*]} "* ]] && echo "$pid"
  return 0
}

make_certs || echo "warning: no TLS test certificates; the TLS tests will skip" >&2
rm -f "$TLS_DIR/host"
if ! ping_ok; then
  start_dockerd
elif [ -f "$TLS_DIR/server-key.pem" ] && ! tls_ok; then
  pid=$(our_dockerd)
  if [ -n "$pid" ]; then
    echo "restarting dockerd (pid $pid) with the TLS listener tcp://127.0.0.1:$TLS_PORT" >&2
    kill -TERM "$pid"
    for _ in $(seq 120); do
      [ -d "/proc/$pid" ] || break
      sleep 0.5
    done
    if [ -d "/proc/$pid" ]; then
      echo "dockerd (pid $pid) did not stop within 60 s" >&2
      exit 1
    fi
    start_dockerd
  else
    echo "warning: the dockerd on $SOCK was not started by this script and has no TLS" \
      "listener on 127.0.0.1:$TLS_PORT; the TLS tests will skip" >&2
  fi
fi
echo "dockerd answers on $SOCK" >&2
if [ -f "$TLS_DIR/server-key.pem" ]; then
  for _ in $(seq 20); do
    tls_ok && break
    sleep 0.5
  done
  if tls_ok; then
    echo "tcp://127.0.0.1:$TLS_PORT" >"$TLS_DIR/host"
    echo "dockerd answers over TLS on tcp://127.0.0.1:$TLS_PORT (certificates: $TLS_DIR)" >&2
  else
    echo "warning: no TLS answer on 127.0.0.1:$TLS_PORT; the TLS tests will skip" >&2
  fi
fi

start=$(date +%s)
DOCKER_HOST="unix://$SOCK" packaging/executor-image/build.sh "$IMAGE"
echo "executor image ready in $(( $(date +%s) - start )) s" >&2
