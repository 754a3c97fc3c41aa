"""Helm chart checks: `helm lint`, `helm template` for the default values and variants, every
rendered object validated against the Kubernetes JSON schemas (kubernetes-validate, strict: no
unknown fields), and the semantics that matter: the KubeSchedulerConfiguration, the webhook,
least-privilege RBAC, the extender's flags (parsed by hami-fast's own option parser), the CRD.
The device config (HAMi's format) has its own file: test_chart_device_config.py.

helm is looked up as $HELM, then the cache scripts/install-helm.sh fills, then PATH; without it
these tests skip and say how to get it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import (
    CHART,
    HELM,
    NS,
    ROOT,
    container,
    device_config_text,
    find,
    helm,
    needs_helm,
    one,
    render,
    scheduler_config,
    set_args,
    with_local_device_config,
)
from k8s_objects import GPU_IDS_HAMI_REGISTERS, GPU_IDS_THAT_BREAK_ANNOTATIONS

CRD_FILE = ROOT / "deploy" / "crds" / "hamipodplacements.scheduling.hami.placement.com.yaml"
KSC_EXAMPLE = ROOT / "deploy" / "kube-scheduler" / "kube-scheduler-config.yaml"
KUBE_VERSIONS = ("1.28.0", "1.37.0")  # the chart's lowest supported minor and the newest schemas


try:
    import functools

    import kubernetes_validate
    import kubernetes_validate.utils as _kv_utils

    # kubernetes-validate re-reads its (multi-MB) definitions file on every call; read each once.
    if not hasattr(_kv_utils.schema_contents, "cache_info"):
        _kv_utils.schema_contents = functools.lru_cache(maxsize=None)(_kv_utils.schema_contents)
except ImportError:  # pragma: no cover - the test extra installs it
    kubernetes_validate = None


RBAC_GROUP = "rbac.authorization.k8s.io"
MONITORING = {"kubernetes.io/metadata.name": "monitoring"}
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no-webhook": {"scheduler": {"admissionWebhook": {"enabled": False}}},
    "cert-manager-monitoring": {
        "scheduler": {
            "certManager": {"enabled": True},
            "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
        },
    },
    "descheduler": {
        "descheduler": {"enabled": True, "replicas": 2, "dryRun": True, "eviction": {"evictionTimeout": "90s"}}
    },
    "everything": {
        "global": {"imageRegistry": "mirror.example.com", "imagePullSecrets": ["regcred"], "labels": {"team": "ml"}},
        "scheduler": {
            "leaderElect": True,
            "replicas": 3,
            "livenessProbe": True,
            "nodeLabelSelector": {"gpu": "on"},
            "kubeQPS": "50",
            "kubeBurst": "100",
            "kubeTimeout": "10",
            "nodeLockRetryTimeout": "20s",
            "defaultSchedulerPolicy": {"nodeSchedulerPolicy": "spread", "gpuSchedulerPolicy": "binpack"},
            "service": {"type": "NodePort"},
            "admissionWebhook": {
                "failurePolicy": "Fail",
                "whitelistNamespaces": ["kube-system", "monitoring"],
                "namespaceSelector": {"matchLabels": {"gpu-tenant": "yes"}},
                "objectSelector": {"matchExpressions": [{"key": "skip-hami", "operator": "DoesNotExist"}]},
            },
            "extender": {
                "extraArgs": ["--kube-qps=60"],
                "extraManagedResources": ["example.com/vgpu"],
                "logLevel": "debug",
            },
            "serviceMonitor": {"enabled": True},
        },
        "descheduler": {
            "enabled": True,
            "auto": {"enabled": True, "maxMovesPerHour": 3, "selector": "team in (ml, vision),movable!=no"},
            "api": {"auth": {"subjects": [{"kind": "Group", "name": "gpu-admins", "apiGroup": RBAC_GROUP}]}},
            "networkPolicy": {"enabled": True, "apiFrom": [{"namespaceSelector": {"matchLabels": MONITORING}}]},
        },
    },
    # The descheduler's API over TLS is the only user of the serving certificate: no webhook at all.
    "descheduler-api-tls-only": {
        "scheduler": {"admissionWebhook": {"enabled": False}},
        "descheduler": {"enabled": True, "webhook": {"enabled": False}, "networkPolicy": {"enabled": True}},
    },
    "no-kube-scheduler-no-leader": {
        "scheduler": {
            "kubeScheduler": {"enabled": False},
            "leaderElect": False,
            "replicas": 3,
            "metricsBindAddress": "",
        },
    },
    "hami-switch-over": {
        "devices": {
            "existingConfigMap": "hami-scheduler-device",
            "ascend": {"enabled": True},
            "iluvatar": {"enabled": True},
        },
        "descheduler": {"enabled": True},
    },
    "custom-url-no-patch": {
        "scheduler": {
            "admissionWebhook": {"customURL": {"enabled": True, "host": "10.0.0.5", "port": 31998, "path": "/webhook"}},
            "patch": {"enabled": False},
        },
    },
}

# Objects of CRDs that are not in the Kubernetes schemas: checked against these hand-written
# subsets of their CRDs' schemas (required fields and types of what the chart sets).
CRD_KIND_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("cert-manager.io/v1", "Issuer"): {
        "type": "object",
        "required": ["metadata", "spec"],
        "properties": {
            "spec": {"type": "object", "minProperties": 1, "properties": {"selfSigned": {"type": "object"}}}
        },
    },
    ("cert-manager.io/v1", "Certificate"): {
        "type": "object",
        "required": ["metadata", "spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["secretName", "issuerRef"],
                "additionalProperties": False,
                "properties": {
                    "secretName": {"type": "string"},
                    "commonName": {"type": "string", "maxLength": 64},
                    "dnsNames": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "duration": {"type": "string"},
                    "renewBefore": {"type": "string"},
                    "issuerRef": {
                        "type": "object",
                        "required": ["name"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string"},
                            "kind": {"type": "string"},
                            "group": {"type": "string"},
                        },
                    },
                },
            }
        },
    },
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object",
        "required": ["metadata", "spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["selector", "endpoints"],
                "additionalProperties": False,
                "properties": {
                    "selector": {"type": "object"},
                    "namespaceSelector": {"type": "object"},
                    "endpoints": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "port": {"type": "string"},
                                "path": {"type": "string"},
                                "scheme": {"enum": ["http", "https"]},
                                "interval": {"type": "string"},
                                "scrapeTimeout": {"type": "string"},
                                "relabelings": {"type": "array"},
                                "metricRelabelings": {"type": "array"},
                            },
                        },
                    },
                },
            }
        },
    },
}


# ---------------------------------------------------------------------------------------------
# helm lint / template


@needs_helm
def test_helm_is_the_pinned_build():
    out = helm("version", "--short").stdout
    assert out.startswith("v3."), out


@needs_helm
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_helm_lint(variant):
    proc = helm(
        "lint", "--strict", str(CHART), "--namespace", NS, "--kube-version", "1.37.2", *set_args(VARIANTS[variant])
    )
    assert "0 chart(s) failed" in proc.stdout, proc.stdout


@needs_helm
@pytest.mark.skipif(kubernetes_validate is None, reason="kubernetes-validate not installed (pip install -e '.[test]')")
@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_object_matches_the_kubernetes_schemas(variant, kube_version):
    import jsonschema

    objs = render(VARIANTS[variant], kube_version=kube_version)
    assert objs
    problems = []
    for obj in objs:
        where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        custom = CRD_KIND_SCHEMAS.get((obj.get("apiVersion"), obj.get("kind")))
        if custom is not None:
            try:
                jsonschema.validate(obj, custom)
            except jsonschema.ValidationError as exc:
                problems.append(f"{where}: {exc.message} at {list(exc.absolute_path)}")
            continue
        try:
            kubernetes_validate.validate(obj, kube_version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{where}: no schema for {obj.get('apiVersion')} {obj.get('kind')}")
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where}: {exc.message} at {list(exc.absolute_path)}")
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(kubernetes_validate is None, reason="kubernetes-validate not installed")
def test_strict_validation_catches_a_misspelt_field():
    """Negative control: the validator really rejects unknown fields and wrong types."""
    bad = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"ports": [{"port": 443}], "selectr": {}},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.37.0", strict=True)
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": [{"port": "https"}]}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.37.0", strict=True)


@needs_helm
def test_names_are_unique_and_namespaced_objects_land_in_the_release_namespace():
    objs = render(VARIANTS["everything"])
    keys = [(o["apiVersion"], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys))
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "CustomResourceDefinition"}
    for o in objs:
        if o["kind"] in cluster_scoped:
            assert "namespace" not in o["metadata"], o["metadata"]
        else:
            assert o["metadata"]["namespace"] == NS, (o["kind"], o["metadata"])
        assert (
            o["metadata"]["labels"]["team"] == "ml"
            or o["kind"] == "CustomResourceDefinition"
            and "team" in o["metadata"]["labels"]
        )


@needs_helm
def test_values_schema_rejects_bad_values():
    for bad in (
        {"scheduler": {"admissionWebhook": {"failurePolicy": "Sometimes"}}},
        {"scheduler": {"defaultSchedulerPolicy": {"nodeSchedulerPolicy": "random"}}},
        {"scheduler": {"defaultSchedulerPolicy": {"gpuSchedulerPolicy": "spread,best"}}},
        {"scheduler": {"admissionWebhook": {"admissionReviewVersions": ["v2"]}}},
        {"scheduler": {"nodeLockExpire": "five minutes"}},
        {"scheduler": {"replicas": 0}},
        {"resourceName": "nvidia.com/gpu count"},
        {"devices": {"nvidia": {"gpuCorePolicy": "always"}}},
        {"descheduler": {"eviction": {"mode": "Delete"}}},
    ):
        proc = helm("template", "hf", str(CHART), "--kube-version", "1.37.2", *set_args(bad), check=False)
        assert proc.returncode != 0, f"accepted {bad}"
        assert "values don't meet the specifications of the schema" in proc.stderr, proc.stderr


@needs_helm
def test_a_hami_values_file_is_accepted():
    """HAMi-only keys are ignored; the overlapping ones take effect."""
    hami_values = {
        "devicePlugin": {"deviceSplitCount": 10, "migStrategy": "none"},
        "scheduler": {
            "overwriteEnv": "false",
            # HAMi's values carry the registry next to the repository (its default: docker.io).
            "extender": {"image": {"registry": "docker.io", "repository": "me/hami-fast", "tag": "v9"}},
            "defaultSchedulerPolicy": {"nodeSchedulerPolicy": "spread", "gpuSchedulerPolicy": "binpack"},
            "kubeScheduler": {
                "image": {
                    "registry": "registry.example.com",
                    "repository": "google_containers/kube-scheduler",
                    "tag": "v1.37.2",
                }
            },
            "admissionWebhook": {
                "whitelistNamespaces": None,
                "namespaceSelector": {"matchLabels": None, "matchExpressions": []},
            },
            "networkPolicy": {"enabled": False},
        },
        "resourceMem": "nvidia.com/gpumem-mb",
    }
    objs = render(hami_values)
    ext = container(objs, "hf-hami-fast-scheduler", "vgpu-scheduler-extender")
    ks = container(objs, "hf-hami-fast-scheduler", "kube-scheduler")
    assert ext["image"] == "docker.io/me/hami-fast:v9"
    assert ks["image"] == "registry.example.com/google_containers/kube-scheduler:v1.37.2"
    assert "--node-scheduler-policy=spread" in ext["args"]
    device_config = yaml.safe_load(
        one(objs, "ConfigMap", "hf-hami-fast-scheduler-device")["data"]["device-config.yaml"]
    )
    assert device_config["nvidia"]["resourceMemoryName"] == "nvidia.com/gpumem-mb"
    assert {"name": "nvidia.com/gpumem-mb", "ignoredByScheduler": True} in scheduler_config(objs)["extenders"][0][
        "managedResources"
    ]


# ---------------------------------------------------------------------------------------------
# KubeSchedulerConfiguration


@needs_helm
def test_kube_scheduler_configuration_default():
    cfg = scheduler_config(render())
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1" and cfg["kind"] == "KubeSchedulerConfiguration"
    assert cfg["leaderElection"] == {"leaderElect": True, "resourceName": "hami-scheduler", "resourceNamespace": NS}
    assert cfg["profiles"] == [{"schedulerName": "hami-scheduler"}]
    (ext,) = cfg["extenders"]
    assert ext["urlPrefix"] == "https://127.0.0.1:9443"
    assert ext["enableHTTPS"] is True and ext["tlsConfig"] == {"insecure": True}
    assert ext["filterVerb"] == "filter"
    assert ext["bindVerb"] == "bind"
    assert "prioritizeVerb" not in ext and "preemptVerb" not in ext
    assert ext["nodeCacheCapable"] is True
    assert ext["weight"] == 1
    assert ext["httpTimeout"] == "30s"
    assert "ignorable" not in ext
    names = [r["name"] for r in ext["managedResources"]]
    # HAMi's chart lists these (Ascend and Iluvatar only when enabled): test_chart_device_config.py
    # compares them with HAMi's rendered chart.
    assert names[:5] == [
        "nvidia.com/gpu",
        "nvidia.com/gpumem",
        "nvidia.com/gpucores",
        "nvidia.com/gpumem-percentage",
        "nvidia.com/priority",
    ]
    assert {"cambricon.com/vmlu", "hygon.com/dcumem", "metax-tech.com/sgpu", "amd.com/gpucores"} <= set(names)
    assert not [n for n in names if n.startswith(("huawei.com/", "iluvatar.ai/"))]
    assert all(r["ignoredByScheduler"] is True for r in ext["managedResources"])


@needs_helm
def test_kube_scheduler_configuration_follows_values():
    objs = render(
        {
            "schedulerName": "gpu-sched",
            "scheduler": {
                "admissionWebhook": {"enabled": False},
                "leaderElect": False,
                "extenderHTTPTimeout": 45,
                "service": {"httpTargetPort": 8080},
            },
        }
    )
    cfg = scheduler_config(objs)
    assert cfg["profiles"] == [{"schedulerName": "gpu-sched"}]
    assert cfg["leaderElection"]["leaderElect"] is False
    (ext,) = cfg["extenders"]
    assert ext["urlPrefix"] == "http://127.0.0.1:8080" and ext["enableHTTPS"] is False and "tlsConfig" not in ext
    assert ext["httpTimeout"] == "45s"
    args = container(objs, "hf-hami-fast-scheduler", "vgpu-scheduler-extender")["args"]
    assert "--http_bind=0.0.0.0:8080" in args and not any(a.startswith("--cert_file") for a in args)
    assert "--scheduler-name=gpu-sched" in args


@needs_helm
def test_kube_scheduler_configuration_matches_the_standalone_example():
    """deploy/kube-scheduler/kube-scheduler-config.yaml is the chart's config for a kube-scheduler run outside the chart."""
    example = yaml.safe_load(KSC_EXAMPLE.read_text())
    rendered = scheduler_config(render())
    rendered["leaderElection"]["resourceNamespace"] = example["leaderElection"]["resourceNamespace"]
    example = {k: v for k, v in example.items() if k != "clientConnection"}
    assert example == rendered


@needs_helm
def test_kube_scheduler_container():
    objs = render()
    ks = container(objs, "hf-hami-fast-scheduler", "kube-scheduler")
    assert ks["image"] == "registry.k8s.io/kube-scheduler:v1.37.2"  # the cluster's version by default
    assert ks["args"] == ["--config=/config/config.yaml", "-v=4"]
    assert {"name": "scheduler-config", "mountPath": "/config", "readOnly": True} in ks["volumeMounts"]
    pod = one(objs, "Deployment")["spec"]["template"]
    assert pod["metadata"]["labels"]["hami.io/webhook"] == "ignore"
    assert pod["spec"]["priorityClassName"] == "system-node-critical"


# ---------------------------------------------------------------------------------------------
# The extender container: flags parsed by hami-fast's own parser


def _parse_serve_args(args: list[str], device_config: str, tmp_path: Path):
    try:
        import argparse

        from hami_fast import config as hf_config
    except ImportError:
        pytest.skip("hami_fast is not importable (make install)")
    parser = argparse.ArgumentParser()
    hf_config.add_arguments(parser)
    ns = parser.parse_args(with_local_device_config(args, device_config, tmp_path))
    return hf_config.load(ns, environ={})


@needs_helm
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_extender_flags_are_accepted_by_hami_fast_serve(variant, tmp_path):
    objs = render(VARIANTS[variant])
    c = container(objs, "hf-hami-fast-scheduler", "vgpu-scheduler-extender")
    assert c["command"] == ["hami-fast", "serve"]
    cfg = _parse_serve_args(c["args"], device_config_text(objs), tmp_path)
    v = VARIANTS[variant].get("scheduler", {})
    assert cfg.scheduler_name == "hami-scheduler"
    assert cfg.node_scheduler_policy == v.get("defaultSchedulerPolicy", {}).get("nodeSchedulerPolicy", "binpack")
    assert cfg.gpu_scheduler_policy == v.get("defaultSchedulerPolicy", {}).get("gpuSchedulerPolicy", "spread")
    assert cfg.leader_elect is v.get("leaderElect", True)
    assert cfg.node_lock_timeout == 300.0
    webhook = v.get("admissionWebhook", {}).get("enabled", True)
    assert bool(cfg.cert_file) is webhook
    if webhook:
        assert cfg.cert_file == "/tls/tls.crt" and cfg.key_file == "/tls/tls.key"
        assert {"name": "tls", "mountPath": "/tls", "readOnly": True} in c["volumeMounts"]
    if variant == "everything":
        assert cfg.node_label_selector == "gpu=on"
        assert cfg.kube_qps == 60.0  # extraArgs come last and win
        assert cfg.kube_burst == 100 and cfg.kube_timeout == 10.0 and cfg.node_lock_retry_timeout == 20.0
        assert cfg.log_level == "debug"
        assert c["image"] == "mirror.example.com/hami-fast:v0.1.0"
        assert c["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["HAMI_NODELOCK_EXPIRE"]["value"] == "5m"
    sc = c["securityContext"]
    assert (
        sc["allowPrivilegeEscalation"] is False
        and sc["readOnlyRootFilesystem"] is True
        and sc["capabilities"] == {"drop": ["ALL"]}
    )


@needs_helm
def test_replicas_and_disruption_budget():
    objs = render(VARIANTS["everything"])
    assert one(objs, "Deployment", "hf-hami-fast-scheduler")["spec"]["replicas"] == 3
    assert one(objs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    objs = render(VARIANTS["no-kube-scheduler-no-leader"])  # replicas only count with leader election
    dep = one(objs, "Deployment", "hf-hami-fast-scheduler")
    assert dep["spec"]["replicas"] == 1 and not find(objs, "PodDisruptionBudget")
    assert [c["name"] for c in dep["spec"]["template"]["spec"]["containers"]] == ["vgpu-scheduler-extender"]
    assert [cm["metadata"]["name"] for cm in find(objs, "ConfigMap")] == ["hf-hami-fast-scheduler-device"]
    assert not find(objs, "Role", "hf-hami-fast-scheduler-leader")
    assert "monitor" not in [p["name"] for p in one(objs, "Service")["spec"]["ports"]]


# ---------------------------------------------------------------------------------------------
# Webhook and certificates


@needs_helm
def test_webhook_registration_default():
    objs = render()
    mwc = one(objs, "MutatingWebhookConfiguration", "hf-hami-fast-webhook")
    (wh,) = mwc["webhooks"]
    assert wh["name"] == "vgpu.hami.io"
    assert wh["admissionReviewVersions"] == ["v1", "v1beta1"]
    assert wh["clientConfig"] == {
        "service": {"name": "hf-hami-fast-scheduler", "namespace": NS, "path": "/webhook", "port": 443}
    }
    assert wh["failurePolicy"] == "Ignore"
    assert wh["matchPolicy"] == "Equivalent"
    assert wh["reinvocationPolicy"] == "Never"
    assert wh["sideEffects"] == "None"
    assert wh["timeoutSeconds"] == 10
    assert wh["rules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "*"}
    ]
    opt_out = {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}
    assert wh["namespaceSelector"] == {"matchExpressions": [opt_out]}
    assert wh["objectSelector"] == {"matchExpressions": [opt_out]}
    # The Service routes 443 to the extender's named port.
    svc = one(objs, "Service", "hf-hami-fast-scheduler")
    assert svc["spec"]["type"] == "ClusterIP"
    assert {"name": "http", "port": 443, "targetPort": "http", "protocol": "TCP"} in svc["spec"]["ports"]
    assert svc["spec"]["selector"] == one(objs, "Deployment")["spec"]["selector"]["matchLabels"]


@needs_helm
def test_webhook_selectors_and_policy_from_values():
    objs = render(VARIANTS["everything"])
    (wh,) = one(objs, "MutatingWebhookConfiguration", "hf-hami-fast-webhook")["webhooks"]
    assert wh["failurePolicy"] == "Fail"
    assert wh["namespaceSelector"] == {
        "matchLabels": {"gpu-tenant": "yes"},
        "matchExpressions": [
            {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "monitoring"]},
        ],
    }
    assert wh["objectSelector"]["matchExpressions"] == [
        {"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]},
        {"key": "skip-hami", "operator": "DoesNotExist"},
    ]
    svc = one(objs, "Service", "hf-hami-fast-scheduler")
    assert svc["spec"]["type"] == "NodePort" and svc["spec"]["ports"][0]["nodePort"] == 31998
    objs = render({"scheduler": {"admissionWebhook": {"manageNamespaceSelector": False}}})
    (wh,) = one(objs, "MutatingWebhookConfiguration")["webhooks"]
    assert "namespaceSelector" not in wh


@needs_helm
def test_self_signed_certificate_jobs():
    objs = render()
    jobs = {j["metadata"]["name"]: j for j in find(objs, "Job")}
    create, patch = jobs["hf-hami-fast-certgen-create"], jobs["hf-hami-fast-certgen-patch"]
    assert create["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert patch["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    (c,) = create["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "registry.k8s.io/ingress-nginx/kube-webhook-certgen:v1.5.2"
    hosts = next(a for a in c["args"] if a.startswith("--host=")).split("=", 1)[1].split(",")
    assert f"hf-hami-fast-scheduler.{NS}.svc" in hosts and f"hf-hami-fast-descheduler.{NS}.svc" in hosts
    assert (
        "--secret-name=hf-hami-fast-scheduler-tls" in c["args"]
        and "--cert-name=tls.crt" in c["args"]
        and "--key-name=tls.key" in c["args"]
    )
    (p,) = patch["spec"]["template"]["spec"]["containers"]
    assert "--webhook-name=hf-hami-fast-webhook" in p["args"] and "--patch-failure-policy=Ignore" in p["args"]
    assert "--patch-mutating=true" in p["args"] and "--patch-validating=false" in p["args"]
    # The Secret the Deployment mounts is the one the Job writes.
    vols = one(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "hf-hami-fast-scheduler-tls"}} in vols
    for j in (create, patch):
        assert j["spec"]["template"]["metadata"]["labels"]["hami.io/webhook"] == "ignore"
        assert j["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    # No cert jobs without the webhook, with cert-manager, or with patch disabled.
    for variant in ("no-webhook", "cert-manager-monitoring", "custom-url-no-patch"):
        assert not find(render(VARIANTS[variant]), "Job"), variant


@needs_helm
def test_cert_manager_mode():
    objs = render(VARIANTS["cert-manager-monitoring"])
    cert = one(objs, "Certificate")
    assert cert["spec"]["secretName"] == "hf-hami-fast-scheduler-tls"
    assert f"hf-hami-fast-scheduler.{NS}.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"] == {"name": "hf-hami-fast-scheduler", "kind": "Issuer", "group": "cert-manager.io"}
    assert one(objs, "Issuer")["spec"] == {"selfSigned": {}}
    mwc = one(objs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NS}/hf-hami-fast-scheduler"
    sm = one(objs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["endpoints"][0]["port"] == "monitor"
    assert sm["spec"]["selector"]["matchLabels"].items() <= one(objs, "Service")["metadata"]["labels"].items()
    objs = render(
        {"scheduler": {"certManager": {"enabled": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}}
    )
    assert not find(objs, "Issuer") and one(objs, "Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
    }


@needs_helm
def test_custom_url_webhook():
    objs = render(VARIANTS["custom-url-no-patch"])
    (wh,) = one(objs, "MutatingWebhookConfiguration")["webhooks"]
    assert wh["clientConfig"] == {"url": "https://10.0.0.5:31998/webhook"}


# ---------------------------------------------------------------------------------------------
# RBAC: least privilege


def _rules(objs, kind, name):
    return one(objs, kind, name)["rules"]


def _grants(rules) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


@needs_helm
def test_scheduler_rbac_is_least_privilege():
    objs = render(VARIANTS["everything"])
    grants = _grants(_rules(objs, "ClusterRole", "hf-hami-fast-scheduler"))
    assert grants == {
        ("", "pods", "get"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "pods", "patch"),
        ("", "pods/binding", "create"),
        ("", "pods/eviction", "create"),
        ("", "pods/status", "patch"),
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("", "nodes", "patch"),
        ("", "resourcequotas", "get"),
        ("", "resourcequotas", "list"),
        ("", "resourcequotas", "watch"),
        ("", "events", "create"),
        ("", "events", "patch"),
        ("policy", "poddisruptionbudgets", "list"),
    }
    role = one(objs, "Role", "hf-hami-fast-scheduler-leader")
    assert role["metadata"]["namespace"] == NS
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named and all(r["resourceNames"] == ["hami-scheduler"] for r in named)
    bound = {b["roleRef"]["name"] for b in find(objs, "ClusterRoleBinding")}
    assert {"system:kube-scheduler", "system:volume-scheduler", "hf-hami-fast-scheduler"} <= bound
    for obj in objs:
        for rule in obj.get("rules", []):
            assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"], (
                obj["metadata"]["name"],
                rule,
            )
            assert "secrets" not in rule["resources"] or obj["metadata"]["name"] == "hf-hami-fast-certgen", obj[
                "metadata"
            ]["name"]
            assert (
                "escalate" not in rule["verbs"] and "bind" not in rule["verbs"] and "impersonate" not in rule["verbs"]
            )


@needs_helm
def test_certgen_rbac_is_scoped_to_its_secret_and_webhooks():
    objs = render(VARIANTS["descheduler"])
    (cr,) = [o for o in find(objs, "ClusterRole") if o["metadata"]["name"] == "hf-hami-fast-certgen"]
    assert cr["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "resourceNames": ["hf-hami-fast-webhook", "hf-hami-fast-descheduler-webhook"],
            "verbs": ["get", "update"],
        }
    ]
    role = one(objs, "Role", "hf-hami-fast-certgen")
    assert role["rules"][1]["resourceNames"] == ["hf-hami-fast-scheduler-tls"]
    assert role["rules"][0]["verbs"] == ["create"]  # create cannot be narrowed by name


# ---------------------------------------------------------------------------------------------
# Descheduler and the HamiPodPlacement CRD


@needs_helm
def test_descheduler_is_off_by_default():
    objs = render()
    assert not [o for o in objs if "descheduler" in o["metadata"]["name"]]
    assert not find(objs, "CustomResourceDefinition")


@needs_helm
def test_descheduler_objects():
    objs = render(VARIANTS["descheduler"])
    dep = one(objs, "Deployment", "hf-hami-fast-descheduler")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["hami-fast", "descheduler"]
    assert "--http_bind=0.0.0.0:8083" in c["args"] and "--webhook-bind=0.0.0.0:9443" in c["args"]
    assert "--leader-elect-resource-name=gpu-descheduler" in c["args"] and "--dry-run=true" in c["args"]
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["template"]["metadata"]["labels"]["app"] == "gpu-descheduler-webhook"
    svc = one(objs, "Service", "hf-hami-fast-descheduler")
    assert {"name": "api", "port": 8083, "targetPort": "api", "protocol": "TCP"} in svc["spec"]["ports"]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    (wh,) = one(objs, "MutatingWebhookConfiguration", "hf-hami-fast-descheduler-webhook")["webhooks"]
    assert wh["sideEffects"] == "NoneOnDryRun" and wh["admissionReviewVersions"] == ["v1", "v1beta1"]
    assert wh["matchConditions"] == [
        {"name": "hami-scheduler-pods", "expression": "object.spec.schedulerName == 'hami-scheduler'"}
    ]
    grants = _grants(_rules(objs, "ClusterRole", "hf-hami-fast-descheduler"))
    assert ("", "pods/eviction", "create") in grants and ("", "pods", "delete") not in grants  # the Eviction API only
    assert ("scheduling.hami.placement.com", "hamipodplacements/status", "patch") in grants
    assert not any(r in ("secrets", "pods/binding") for _, r, _ in grants)
    crd = one(objs, "CustomResourceDefinition")
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


@needs_helm
@pytest.mark.parametrize("variant", ["descheduler", "everything", "hami-switch-over"])
def test_descheduler_flags_are_accepted_by_hami_fast_descheduler(variant, tmp_path):
    try:
        import argparse

        from hami_fast.descheduler import cli as dcli
    except ImportError:
        pytest.skip("hami_fast.descheduler is not importable")
    objs = render(VARIANTS[variant])
    (c,) = one(objs, "Deployment", "hf-hami-fast-descheduler")["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    dcli.add_arguments(parser)
    args = parser.parse_args(with_local_device_config(c["args"], device_config_text(objs), tmp_path))
    v = vars(args)
    assert v["bind"] == "0.0.0.0:8083" and v["webhook_bind"] == "0.0.0.0:9443"
    assert v["cert_file"] == "/tls/tls.crt" and v["key_file"] == "/tls/tls.key"
    assert v["scheduler_name"] == "hami-scheduler" and v["leader_elect"] is True
    assert v["lease_name"] == "gpu-descheduler" and v["lease_namespace"] == NS
    assert v["eviction_mode"] == "Eviction"
    if variant in ("descheduler", "hami-switch-over"):
        assert v["dry_run"] is (variant == "descheduler")
        assert v["eviction_timeout"] == (90.0 if variant == "descheduler" else 300.0)
        assert v["auto"] is False, "the automatic mode is off by default"
    else:
        assert v["auto"] is True and v["max_moves_per_hour"] == 3 and v["max_moves_per_pending_pod"] == 4
        assert v["selector"] == "team in (ml, vision),movable!=no" and v["namespace_selector"] == ""
        assert v["auto_period"] == 30.0 and v["reservation_ttl"] == 600.0
        assert v["max_concurrent_moves"] == 2 and v["moves_configmap"] == "hf-hami-fast-descheduler-auto-moves"


@needs_helm
def test_the_auto_modes_record_of_moves_is_the_one_configmap_it_may_write():
    assert not find(render(VARIANTS["descheduler"]), "Role", "hf-hami-fast-descheduler-auto"), "only with --auto"
    objs = render(VARIANTS["everything"])
    role = one(objs, "Role", "hf-hami-fast-descheduler-auto")
    assert role["metadata"]["namespace"] == NS
    assert _grants(role["rules"]) == {
        ("", "configmaps", "create"),
        ("", "configmaps", "get"),
        ("", "configmaps", "update"),
    }
    [named] = [r for r in role["rules"] if r.get("resourceNames")]
    assert named["resourceNames"] == ["hf-hami-fast-descheduler-auto-moves"] and "create" not in named["verbs"]
    binding = one(objs, "RoleBinding", "hf-hami-fast-descheduler-auto")
    assert binding["roleRef"]["name"] == "hf-hami-fast-descheduler-auto"
    assert binding["subjects"][0]["namespace"] == NS


# ---------------------------------------------------------------------------------------------
# Descheduler API access: authentication, authorisation, TLS, the loopback listener, NetworkPolicy


def _descheduler_args(objs: list[dict[str, Any]]) -> argparse.Namespace:
    from hami_fast.descheduler import cli as dcli

    (c,) = one(objs, "Deployment", "hf-hami-fast-descheduler")["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    dcli.add_arguments(parser)
    return parser.parse_args(c["args"])


@needs_helm
def test_descheduler_api_is_authenticated_and_https_by_default():
    from hami_fast.descheduler.access import auth_mode
    from hami_fast.descheduler.listeners import api_tls

    objs = render(VARIANTS["descheduler"])
    args = _descheduler_args(objs)
    assert auth_mode(args.api_auth, args.bind, snapshot=False) == "kubernetes" and args.api_auth == "kubernetes"
    assert api_tls(args) and args.cert_file == "/tls/tls.crt" and args.webhook_bind == "0.0.0.0:9443"
    assert args.local_bind == "127.0.0.1:8084", "the port-forward listener, on the pod's loopback only"
    (c,) = one(objs, "Deployment", "hf-hami-fast-descheduler")["spec"]["template"]["spec"]["containers"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "api", "scheme": "HTTPS"}
    assert {"name": "tls", "mountPath": "/tls", "readOnly": True} in c["volumeMounts"]
    (create,) = one(objs, "Job", "hf-hami-fast-certgen-create")["spec"]["template"]["spec"]["containers"]
    assert "hf-hami-fast-descheduler.hami-system.svc" in create["args"][1].split(","), "the certificate covers the API"
    assert not find(objs, "NetworkPolicy"), "the NetworkPolicy is optional"


@needs_helm
def test_descheduler_rbac_for_reviews_and_the_role_users_are_bound_to():
    from hami_fast.descheduler.access import attributes_in

    objs = render(VARIANTS["everything"])
    grants = _grants(_rules(objs, "ClusterRole", "hf-hami-fast-descheduler"))
    assert ("authentication.k8s.io", "tokenreviews", "create") in grants
    assert ("authorization.k8s.io", "subjectaccessreviews", "create") in grants
    role = _grants(_rules(objs, "ClusterRole", "hf-hami-fast-descheduler-api"))
    asked = set()
    for method in ("GET", "POST"):
        a = attributes_in(NS)(method, "/api/v1/plan")
        assert a.namespace == NS
        asked.add((a.group, f"{a.resource}/{a.subresource}", a.verb))
    assert role == asked == {("hami-fast.io", "descheduler/api", "get"), ("hami-fast.io", "descheduler/plan", "create")}
    binding = one(objs, "ClusterRoleBinding", "hf-hami-fast-descheduler-api")
    assert binding["roleRef"]["name"] == "hf-hami-fast-descheduler-api"
    assert binding["subjects"] == [{"kind": "Group", "name": "gpu-admins", "apiGroup": RBAC_GROUP}]
    assert not find(render(VARIANTS["descheduler"]), "ClusterRoleBinding", "hf-hami-fast-descheduler-api"), (
        "no binding without subjects"
    )


@needs_helm
def test_descheduler_auth_off_and_no_local_listener():
    objs = render({"descheduler": {"enabled": True, "api": {"auth": {"enabled": False}, "localPort": 0}}})
    args = _descheduler_args(objs)
    assert args.api_auth == "none" and args.local_bind == ""
    grants = _grants(_rules(objs, "ClusterRole", "hf-hami-fast-descheduler"))
    assert not {g for g in grants if g[0] in ("authentication.k8s.io", "authorization.k8s.io")}
    assert not find(objs, "ClusterRole", "hf-hami-fast-descheduler-api")


@needs_helm
def test_descheduler_plain_http_api_when_tls_is_off():
    from hami_fast.descheduler.listeners import api_tls

    objs = render({"descheduler": {"enabled": True, "api": {"tls": {"enabled": False}}}})
    args = _descheduler_args(objs)
    assert not api_tls(args) and args.webhook_bind, "the webhook keeps its TLS listener"
    (c,) = one(objs, "Deployment", "hf-hami-fast-descheduler")["spec"]["template"]["spec"]["containers"]
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTP"


@needs_helm
def test_descheduler_api_tls_alone_gets_a_certificate_and_no_webhook_patching():
    from hami_fast.descheduler.listeners import api_tls

    objs = render(VARIANTS["descheduler-api-tls-only"])
    args = _descheduler_args(objs)
    assert api_tls(args) and not args.webhook_bind and args.cert_file == "/tls/tls.crt"
    assert not find(objs, "MutatingWebhookConfiguration")
    assert one(objs, "Job", "hf-hami-fast-certgen-create")
    assert not find(objs, "Job", "hf-hami-fast-certgen-patch"), "no webhook to patch"
    assert not find(objs, "ClusterRole", "hf-hami-fast-certgen"), "empty resourceNames would grant every webhook"
    certmanager = render({**VARIANTS["descheduler-api-tls-only"], "scheduler": {
        "admissionWebhook": {"enabled": False}, "certManager": {"enabled": True}}})  # fmt: skip
    assert one(certmanager, "Certificate")["spec"]["secretName"] == "hf-hami-fast-scheduler-tls"
    policy = one(objs, "NetworkPolicy", "hf-hami-fast-descheduler")
    assert policy["spec"]["ingress"] == [], "no webhook and no apiFrom: nothing reaches the pods over the network"


@needs_helm
def test_descheduler_network_policy_opens_the_webhook_to_all_and_the_api_to_apifrom():
    objs = render(VARIANTS["everything"])
    policy = one(objs, "NetworkPolicy", "hf-hami-fast-descheduler")
    dep = one(objs, "Deployment", "hf-hami-fast-descheduler")
    assert policy["spec"]["podSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    webhook, api = policy["spec"]["ingress"]
    assert webhook == {"ports": [{"port": 9443, "protocol": "TCP"}]}, "from anywhere: the API server calls it"
    assert api == {
        "from": [{"namespaceSelector": {"matchLabels": MONITORING}}],
        "ports": [{"port": 8083, "protocol": "TCP"}],
    }


def test_crd_copies_are_identical():
    assert CRD_FILE.read_bytes() == (CHART / "files" / "crds" / CRD_FILE.name).read_bytes()


def _crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD_FILE.read_text())
    assert crd["metadata"]["name"] == "hamipodplacements.scheduling.hami.placement.com"
    assert crd["spec"]["group"] == "scheduling.hami.placement.com" and crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["kind"] == "HamiPodPlacement" and crd["spec"]["names"]["plural"] == "hamipodplacements"
    (v1,) = crd["spec"]["versions"]
    assert v1["name"] == "v1" and v1["served"] and v1["storage"] and v1["subresources"] == {"status": {}}
    return v1["schema"]["openAPIV3Schema"]


def _placement(**spec):
    base = {
        "reqID": "defrag-1",
        "podSelector": {"matchLabels": {"app": "infer-a"}},
        "nodeName": "gpu-node-7",
        "gpuDevices": ["gpu-3"],
    }
    base.update(spec)
    return {
        "apiVersion": "scheduling.hami.placement.com/v1",
        "kind": "HamiPodPlacement",
        "metadata": {"name": "p", "namespace": "serving"},
        "spec": {k: v for k, v in base.items() if v is not None},
    }


def test_crd_schema_accepts_valid_placements_and_rejects_invalid_ones():
    import jsonschema

    schema = _crd_schema()
    ok = [
        _placement(),
        _placement(
            gpuDevices=["gpu-0/20", "GPU-8f2c1a4e-1b2c-4d5e-9f00-0123456789ab"], evictPod="infer-a-7f9c6d5b8-x2k4q"
        ),
        # Every id HAMi's device plugin can register (it writes what the driver reports).
        _placement(gpuDevices=GPU_IDS_HAMI_REGISTERS),
    ]
    for p in ok:
        jsonschema.validate(p, schema)
    p = _placement()
    p["status"] = {
        "phase": "Completed",
        "assignmentDetails": [{"podName": "x", "gpuDevice": "GPU-1"}],
        "consumedAt": "2026-01-01T00:00:00Z",
    }
    jsonschema.validate(p, schema)
    bad = [
        _placement(reqID=None),
        _placement(nodeName=None),
        _placement(gpuDevices=[]),
        # Python's `$` also matches before a final newline (Go's does not): kube-apiserver's refusal
        # of "GPU-a\n" is checked end to end (tests/e2e/test_e2e_descheduler.py).
        *(_placement(gpuDevices=[bad]) for bad in GPU_IDS_THAT_BREAK_ANNOTATIONS if not bad.endswith("\n")),
        _placement(podSelector={}),
        _placement(podSelector={"matchLabels": {}}),
        _placement(nodeName="Node_7"),
        _placement(reqID=""),
    ]
    for p in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(p, schema)
    p = _placement()
    p["status"] = {"phase": "Running"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(p, schema)


@pytest.mark.skipif(kubernetes_validate is None, reason="kubernetes-validate not installed")
def test_crd_file_matches_the_kubernetes_schema():
    kubernetes_validate.validate(yaml.safe_load(CRD_FILE.read_text()), "1.37.0", strict=True)


# ---------------------------------------------------------------------------------------------
# values.schema.json is generated


def test_values_schema_is_current():
    sys.path.insert(0, str(ROOT / "deploy" / "helm"))
    try:
        import gen_schema
    finally:
        sys.path.pop(0)
    on_disk = json.loads((CHART / "values.schema.json").read_text())
    assert on_disk == gen_schema.schema, "values.schema.json is stale: run python deploy/helm/gen_schema.py"


def test_default_values_match_the_schema():
    import jsonschema

    jsonschema.validate(
        yaml.safe_load((CHART / "values.yaml").read_text()), json.loads((CHART / "values.schema.json").read_text())
    )


def test_kube_scheduler_accepts_the_rendered_config(tmp_path):
    """With a kube-scheduler binary built (scripts/build-control-plane.sh), let it load the config."""
    if HELM is None:
        pytest.skip("helm not found: run scripts/install-helm.sh")
    binary = os.environ.get("KUBE_SCHEDULER") or _cached_control_plane("kube-scheduler")
    if not binary:
        pytest.skip("no kube-scheduler built (scripts/build-control-plane.sh)")
    cfg = tmp_path / "config.yaml"
    cfg.write_text(one(render(), "ConfigMap", "hf-hami-fast-scheduler")["data"]["config.yaml"])
    out = tmp_path / "written.yaml"
    # A master address is required to build clients; nothing connects before the config is written.
    proc = subprocess.run(
        [binary, f"--config={cfg}", f"--write-config-to={out}", "--master=https://127.0.0.1:9", "--secure-port=0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = yaml.safe_load(out.read_text())
    (ext,) = written["extenders"]
    assert ext["filterVerb"] == "filter" and ext["bindVerb"] == "bind" and ext["nodeCacheCapable"] is True
    assert ext["httpTimeout"] == "30s"
    assert all(r["ignoredByScheduler"] for r in ext["managedResources"])


def _cached_control_plane(name: str) -> str | None:
    cache = Path(os.environ.get("HAMI_FAST_CACHE", Path.home() / ".cache" / "hami-fast")) / "bin"
    for p in sorted(cache.glob(f"k8s-*/{name}"), reverse=True):
        if os.access(p, os.X_OK):
            return str(p)
    return None
