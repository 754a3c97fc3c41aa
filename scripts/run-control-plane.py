#!/usr/bin/env python3
"""Start the e2e control plane (etcd, kube-apiserver, kube-scheduler, hami-fast over TLS, wired as
the Helm chart wires them) and keep it running until Ctrl-C, for manual poking:

    scripts/build-control-plane.sh && scripts/install-helm.sh
    python scripts/run-control-plane.py [--workdir DIR]
    kubectl --kubeconfig DIR/admin.kubeconfig get nodes     # any kubectl, or the Python client

It is the same code the end-to-end tests use (tests/e2e/controlplane.py and conftest.py).
"""

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--workdir", default="", help="where certificates, kubeconfigs and logs go (default: a temp dir)"
    )
    args = parser.parse_args()
    from controlplane import missing_binaries, running_cluster

    missing = missing_binaries()
    if missing:
        print(f"missing binaries: {missing}; run scripts/build-control-plane.sh", file=sys.stderr)
        return 1
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="hami-fast-cp-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    with running_cluster(workdir) as cluster:
        admin = cluster.cp.kubeconfig("admin", cluster.cp.admin_token)
        print(
            f"control plane up: {cluster.cp.server}\n  admin kubeconfig: {admin}\n"
            f"  hami-fast: https://127.0.0.1:{cluster.port}\n  logs: {workdir / 'logs'}\n  timings: {cluster.cp.timings}",
            flush=True,
        )
        try:
            while not stop:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
