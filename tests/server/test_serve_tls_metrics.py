"""TLS end to end with a test CA (and certificate rotation), and the Prometheus endpoint."""

from __future__ import annotations

import http.client
import ssl
import time
import urllib.request
from pathlib import Path

import pytest
import trustme
from k8s_objects import filter_args, gpu_pod
from kubeapi.fixtures import wait_for
from serving import Service, free_port


def write_cert(ca: trustme.CA, directory: Path) -> tuple[str, str]:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert.private_key_pem.write_to_path(str(key_file))
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    return str(cert_file), str(key_file)


def handshake_ok(port: int, ca: trustme.CA) -> bool:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=5) as r:
            return r.status == 200
    except (ssl.SSLError, OSError):
        return False


def test_tls_with_a_test_ca_and_rotation(tmp_path: Path) -> None:
    first = trustme.CA()
    cert_file, key_file = write_cert(first, tmp_path)
    ca_file = tmp_path / "ca.pem"
    first.cert_pem.write_to_path(str(ca_file))
    with Service(ca_file=str(ca_file), demo=True, cert_file=cert_file, key_file=key_file) as svc:
        pod = gpu_pod("tls", gpu=1, mem=1000)
        result = svc.post("/filter", filter_args(pod, ["demo-gpu-000"]))
        assert result["NodeNames"] == ["demo-gpu-000"]
        assert handshake_ok(svc.port, first)
        plain = urllib.request.Request(f"http://127.0.0.1:{svc.port}/healthz")
        with pytest.raises((OSError, http.client.HTTPException)):
            urllib.request.urlopen(plain, timeout=3)

        second = trustme.CA()
        time.sleep(1.1)  # distinct mtime
        write_cert(second, tmp_path)
        wait_for(lambda: handshake_ok(svc.port, second), 15, "rotated certificate served", interval=0.2)
        assert not handshake_ok(svc.port, first)
        # state survived the listener restart
        assert svc.cluster.pod_count() == 1


def test_metrics_endpoint(tmp_path: Path) -> None:
    port = free_port()
    with Service(demo=True, metrics_bind_address=f"127.0.0.1:{port}") as svc:
        svc.post("/filter", filter_args(gpu_pod("m", gpu=1, mem=1234, cores=10), ["demo-gpu-001"]))
        svc.post("/filter", filter_args(gpu_pod("big", gpu=9, mem=1), ["demo-gpu-001"]))
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    allocated = [
        line
        for line in text.splitlines()
        if line.startswith("hami_gpu_memory_allocated_bytes{") and 'node="demo-gpu-001"' in line
    ]
    assert any(
        float(line.rsplit(" ", 1)[1]) == 1234 * 1048576 and 'zone="vGPU"' in line and 'device_cores="10"' in line
        for line in allocated
    ), allocated
    assert 'hami_gpu_memory_limit_bytes{device_index="0"' in text or "hami_gpu_memory_limit_bytes{" in text
    assert 'hami_fast_request_duration_seconds_count{route="filter"} 2.0' in text
    pod_line = [
        line for line in text.splitlines() if line.startswith("hami_vgpu_memory_allocated_bytes{") and 'pod="m"' in line
    ]
    assert (
        len(pod_line) == 1
        and 'node="demo-gpu-001"' in pod_line[0]
        and float(pod_line[0].rsplit(" ", 1)[1]) == 1234 * 1048576
    )
    assert 'hami_fast_filter_node_failures_total{reason="NodeInsufficientDevice"} 1.0' in text
    assert 'hami_fast_filter_results_total{result="scheduled"} 1.0' in text
