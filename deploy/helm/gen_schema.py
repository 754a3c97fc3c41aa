#!/usr/bin/env python3
"""Writes deploy/helm/hami-fast/values.schema.json (run after changing values.yaml; a test checks it is current).

Known values are type-checked (enums where the binary accepts a fixed set). Unknown keys are
allowed on purpose, so an operator can pass a HAMi values file unchanged: HAMi-only keys
(the device plugin's image, ...) are ignored, as the chart says.
"""

import json
from pathlib import Path

S = {"type": "string"}
B = {"type": "boolean"}
I = {"type": "integer", "minimum": 0}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
MAP = {"type": "object"}
STRMAP = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
LIST = {"type": "array"}
STRLIST = {"type": "array", "items": {"type": "string"}}
OPTNUM = {"type": ["string", "number"], "pattern": r"^[0-9.]*$"}
DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"}
OPTDURATION = {"type": ["string", "number"], "pattern": r"^(([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+|[0-9.]*)$"}
RESOURCE = {
    "type": "string",
    "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
}
PULL = {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]}
# HAMi's values write some booleans as strings ("false").
BOOLISH = {"enum": [True, False, "true", "false"]}
RESOURCES = {"type": ["array", "null"], "items": RESOURCE}
NAME = {"type": "string", "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$", "maxLength": 253}


def obj(props, required=(), additional=True):
    out = {"type": "object", "properties": props}
    if required:
        out["required"] = list(required)
    if not additional:
        out["additionalProperties"] = False
    return out


def image(tag_required=False):
    return obj(
        {"registry": S, "repository": S, "tag": S, "pullPolicy": PULL, "pullSecrets": STRLIST},
        required=("repository",) if tag_required else (),
    )


SELECTOR = obj(
    {
        "matchLabels": {"type": ["object", "null"], "additionalProperties": S},
        "matchExpressions": {
            "type": ["array", "null"],
            "items": obj(
                {"key": S, "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]}, "values": STRLIST},
                required=("key", "operator"),
            ),
        },
    }
)
POLICY_FAIL = {"type": "string", "enum": ["Ignore", "Fail"]}
REINVOKE = {"type": "string", "enum": ["Never", "IfNeeded"]}
GPU_POLICY = {
    "type": "string",
    "pattern": r"^(spread|binpack|topology-aware|mutex|numa)(,(spread|binpack|topology-aware|mutex|numa))*$",
}

# HAMi's top-level resource-name values of the vendors other than NVIDIA.
VENDOR_RESOURCE_VALUES = (
    *("mluResourceName", "mluResourceMem", "mluResourceCores"),
    *("dcuResourceName", "dcuResourceMem", "dcuResourceCores"),
    *("metaxResourceName", "metaxResourceCore", "metaxResourceMem"),
    *("enflameResourceNameDRSGCU", "enflameResourceNameGCUMemory", "enflameResourceNameGCUCore"),
    *("kunlunResourceName", "kunlunResourceVCountName", "kunlunResourceVMemoryName"),
    *("vastaiResourceName", "birenResourceName"),
)

schema = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "hami-fast chart values",
    **obj(
        {
            "global": obj(
                {
                    "imageRegistry": S,
                    "imagePullSecrets": STRLIST,
                    "imageTag": S,
                    "labels": STRMAP,
                    "annotations": STRMAP,
                }
            ),
            "nameOverride": S,
            "fullnameOverride": S,
            "namespaceOverride": S,
            "resourceName": RESOURCE,
            "resourceMem": RESOURCE,
            "resourceMemPercentage": RESOURCE,
            "resourceCores": RESOURCE,
            "resourcePriority": RESOURCE,
            **{name: RESOURCE for name in VENDOR_RESOURCE_VALUES},
            "metaxsGPUTopologyAware": BOOLISH,
            "schedulerName": {"type": "string", "minLength": 1, "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
            "devices": obj(
                {
                    "existingConfigMap": NAME,
                    "existingConfigMapKey": {"type": "string", "pattern": r"^[-._a-zA-Z0-9]+$"},
                    "nvidia": obj(
                        {
                            "gpuCorePolicy": {"enum": ["default", "force", "disable"]},
                            "defaultMemory": I,
                            "defaultCores": {"type": "integer", "minimum": 0, "maximum": 100},
                            "defaultGPUNum": I,
                            "memoryFactor": {"type": "integer", "minimum": 1},
                            "libCudaLogLevel": I,
                            "customresources": RESOURCES,
                        }
                    ),
                    "ascend": obj(
                        {"enabled": B, "runtimeClassName": S, "hamiVnpuCore": BOOLISH, "customresources": RESOURCES}
                    ),
                    **{
                        vendor: obj({"enabled": B, "customresources": RESOURCES})
                        for vendor in ("iluvatar", "mthreads", "enflame", "kunlun", "vastai", "biren")
                    },
                    **{vendor: obj({"customresources": RESOURCES}) for vendor in ("amd", "awsneuron")},
                }
            ),
            "device-config": obj({"content": {"type": ["string", "null"]}}),
            "devicePlugin": obj(
                {
                    "deviceSplitCount": {"type": "integer", "minimum": 1},
                    "deviceMemoryScaling": {"type": "number", "exclusiveMinimum": 0},
                    "deviceCoreScaling": {"type": "number", "exclusiveMinimum": 0},
                    "enableNumaTopology": BOOLISH,
                    "preConfiguredDeviceMemory": I,
                    "runtimeClassName": {"type": ["string", "null"]},
                }
            ),
            "scheduler": obj(
                {
                    "nodeName": S,
                    "overwriteEnv": BOOLISH,
                    "nodeLabelSelector": {
                        "type": ["object", "null"],
                        "additionalProperties": {"type": ["string", "number", "boolean"]},
                    },
                    "defaultSchedulerPolicy": obj(
                        {"nodeSchedulerPolicy": {"enum": ["binpack", "spread"]}, "gpuSchedulerPolicy": GPU_POLICY}
                    ),
                    "metricsBindAddress": {"type": "string", "pattern": r"^(|[^:]*:[0-9]{1,5})$"},
                    "kubeQPS": OPTNUM,
                    "kubeBurst": OPTNUM,
                    "kubeTimeout": OPTDURATION,
                    "nodeLockExpire": DURATION,
                    "nodeLockRetryTimeout": OPTDURATION,
                    "extenderHTTPTimeout": {"type": "number", "exclusiveMinimum": 0},
                    "forceOverwriteDefaultScheduler": B,
                    "vgpuPreemption": B,
                    "livenessProbe": B,
                    "leaderElect": B,
                    "replicas": {"type": "integer", "minimum": 1},
                    "podDisruptionBudget": obj(
                        {
                            "minAvailable": {"type": ["integer", "string"]},
                            "maxUnavailable": {"type": ["integer", "string"]},
                        }
                    ),
                    "priorityClassName": S,
                    "podAnnotations": STRMAP,
                    "podLabels": STRMAP,
                    "nodeSelector": STRMAP,
                    "tolerations": LIST,
                    "affinity": MAP,
                    "kubeScheduler": obj(
                        {
                            "enabled": B,
                            "image": image(),
                            "resources": MAP,
                            "extraNewArgs": STRLIST,
                            "extraArgs": STRLIST,
                        }
                    ),
                    "extender": obj(
                        {
                            "image": image(),
                            "resources": MAP,
                            "logLevel": {"enum": ["debug", "info", "warning", "error"]},
                            "extraArgs": STRLIST,
                            "extraManagedResources": {"type": "array", "items": RESOURCE},
                        }
                    ),
                    "admissionWebhook": obj(
                        {
                            "enabled": B,
                            "customURL": obj(
                                {"enabled": B, "host": S, "port": PORT, "path": {"type": "string", "pattern": "^/"}}
                            ),
                            "whitelistNamespaces": {"type": ["array", "null"], "items": S},
                            "manageNamespaceSelector": B,
                            "namespaceSelector": SELECTOR,
                            "objectSelector": SELECTOR,
                            "reinvocationPolicy": REINVOKE,
                            "failurePolicy": POLICY_FAIL,
                            "timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 30},
                            "admissionReviewVersions": {
                                "type": "array",
                                "minItems": 1,
                                "uniqueItems": True,
                                "items": {"enum": ["v1", "v1beta1"]},
                            },
                        }
                    ),
                    "certManager": obj(
                        {
                            "enabled": B,
                            "issuerRef": obj({"name": S, "kind": S, "group": S}),
                            "duration": DURATION,
                            "renewBefore": DURATION,
                        }
                    ),
                    "patch": obj(
                        {
                            "enabled": B,
                            "image": image(),
                            "priorityClassName": S,
                            "podAnnotations": STRMAP,
                            "nodeSelector": STRMAP,
                            "tolerations": LIST,
                            "runAsUser": I,
                            "resources": MAP,
                        }
                    ),
                    "service": obj(
                        {
                            "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                            "httpPort": PORT,
                            "httpTargetPort": PORT,
                            "schedulerPort": PORT,
                            "monitorPort": PORT,
                            "monitorTargetPort": {"type": ["string", "integer"]},
                            "labels": STRMAP,
                            "annotations": STRMAP,
                        }
                    ),
                    "serviceMonitor": obj(
                        {
                            "enabled": B,
                            "interval": DURATION,
                            "scrapeTimeout": {"type": "string", "pattern": r"^(|([0-9]+(ms|s|m|h))+)$"},
                            "labels": STRMAP,
                            "relabelings": LIST,
                            "metricRelabelings": LIST,
                        }
                    ),
                    "serviceAccount": obj({"create": B, "name": S, "annotations": STRMAP}),
                }
            ),
            "descheduler": obj(
                {
                    "enabled": B,
                    "replicas": {"type": "integer", "minimum": 1},
                    "image": image(),
                    "leaderElection": obj({"enabled": B, "leaseName": {"type": "string", "minLength": 1}}),
                    "api": obj(
                        {
                            "port": PORT,
                            "auth": obj({"enabled": B, "subjects": LIST}),
                            "tls": obj({"enabled": B}),
                            "localPort": {"type": "integer", "minimum": 0, "maximum": 65535},
                        }
                    ),
                    "service": obj({"type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]}, "port": PORT}),
                    "networkPolicy": obj({"enabled": B, "apiFrom": LIST}),
                    "webhook": obj(
                        {
                            "enabled": B,
                            "port": PORT,
                            "failurePolicy": POLICY_FAIL,
                            "timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 30},
                            "reinvocationPolicy": REINVOKE,
                            "namespaceSelector": SELECTOR,
                            "objectSelector": SELECTOR,
                        }
                    ),
                    "eviction": obj(
                        {"mode": {"enum": ["Eviction"]}, "evictionTimeout": DURATION, "replacementTimeout": DURATION}
                    ),
                    "placementTTL": DURATION,
                    "dryRun": B,
                    "auto": obj(
                        {
                            "enabled": B,
                            "maxMovesPerHour": I,
                            "maxMovesPerPendingPod": {"type": "integer", "minimum": 1},
                            "maxConcurrentMoves": {"type": "integer", "minimum": 1},
                            "selector": S,
                            "namespaceSelector": S,
                            "period": DURATION,
                            "reservationTTL": DURATION,
                        }
                    ),
                    "crds": obj({"install": B, "keep": B}),
                    "extraArgs": STRLIST,
                    "resources": MAP,
                    "priorityClassName": S,
                    "podAnnotations": STRMAP,
                    "nodeSelector": STRMAP,
                    "tolerations": LIST,
                    "affinity": MAP,
                    "serviceAccount": obj({"create": B, "name": S, "annotations": STRMAP}),
                }
            ),
        }
    ),
}

if __name__ == "__main__":
    out = Path(__file__).parent / "hami-fast" / "values.schema.json"
    out.write_text(json.dumps(schema, indent=2) + "\n")
    print(out)
