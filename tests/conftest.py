"""Shared pytest wiring. Keep fixtures in their own modules and import them here."""

from kubeapi.fixtures import kubeapi, kubeapi_factory, kubeapi_tls  # noqa: F401  (test Kubernetes API server)
