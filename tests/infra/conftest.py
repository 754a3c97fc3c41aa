"""The infra area: what ships around the engine (Helm chart, container image, configuration and
device config, the `_native.pyi` stubs, the import graph, bench tools). Tests that need helm, a
kube-scheduler or an image skip without them (tests/helm_chart.py, $HELM, $KUBE_SCHEDULER)."""
