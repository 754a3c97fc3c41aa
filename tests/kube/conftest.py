"""The kube area: hami_fast's Kubernetes pieces (client, errors, events, node handshake) and the
test API server's own contract (tests/kubeapi). Its fixtures (`kubeapi`, `client`) are shared with
the server, descheduler and cli areas, so they live in tests/conftest.py."""
