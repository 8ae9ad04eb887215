"""The fake Kubernetes API server's parts (see tests/k8s/README.md)."""
