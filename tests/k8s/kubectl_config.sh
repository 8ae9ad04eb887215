#!/bin/sh
# Writes DIR/config with the real `kubectl config` commands, and the files it names (DIR/pki/*,
# DIR/token), so the kubeconfig reader is checked against kubectl's own output
# (tests/k8s/kube_config_test.cc). Run from / so kubectl must store the names relative to the
# kubeconfig's directory (it does when they are below it) or absolute, never relative to the
# working directory. tests/k8s/kubectl-1.32/ is this script's output, for machines without
# kubectl: `tests/k8s/kubectl_config.sh tests/k8s/kubectl-1.32`.
set -eu
dir=$(cd "$1" && pwd)
mkdir -p "$dir/pki"
# Not real certificates (kubectl does not parse them; the reader only checks for PEM armour).
for f in ca client; do
  printf -- '-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n' >"$dir/pki/$f.crt"
done
printf -- '-----BEGIN PRIVATE KEY-----\nZmFrZSBrZXk=\n-----END PRIVATE KEY-----\n' >"$dir/pki/client.key"
printf 'erin-token\n' >"$dir/token"
rm -f "$dir/config"
cd /
k() { kubectl config --kubeconfig "$dir/config" "$@" >/dev/null; }
k set-cluster prod --server='https://[fd00::1]:6443' --certificate-authority="$dir/pki/ca.crt" \
  --embed-certs=true
k set-cluster dev --server=https://dev.example:8443/base --certificate-authority="$dir/pki/ca.crt" \
  --tls-server-name=api.dev
# "y" is YAML 1.1's true when plain: kubectl quotes it.
k set-cluster y --server=https://10.0.0.1 --insecure-skip-tls-verify=true
k set-credentials alice --token=alice-token
k set-credentials bob --client-certificate="$dir/pki/client.crt" --client-key="$dir/pki/client.key"
k set-credentials carol --username=carol --password='p:w'
k set-credentials dave --exec-command=aws --exec-api-version=client.authentication.k8s.io/v1 \
  --exec-arg=eks
k set users.erin.tokenFile token
k set-context a --cluster=prod --user=alice --namespace=team-a
k set-context b --cluster=dev --user=bob
k set-context c --cluster=y --user=carol
k set-context d --cluster=y --user=dave
k set-context e --cluster=dev --user=erin
k use-context b
