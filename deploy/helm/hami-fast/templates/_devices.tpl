{{/* The device config in HAMi's format: where it lives, its content, how pods mount it --- */}}

{{- define "hami-fast.deviceConfig.mountDir" -}}/device-config{{- end }}

{{- define "hami-fast.deviceConfig.file" -}}
{{- include "hami-fast.deviceConfig.mountDir" . }}/device-config.yaml
{{- end }}

{{- define "hami-fast.deviceConfig.configMapName" -}}
{{- default (printf "%s-device" (include "hami-fast.scheduler" .)) .Values.devices.existingConfigMap }}
{{- end }}

{{- define "hami-fast.deviceConfig.key" -}}
{{- if .Values.devices.existingConfigMap }}{{ .Values.devices.existingConfigMapKey }}{{ else }}device-config.yaml{{ end }}
{{- end }}

{{- /* HAMi's values carry booleans as "true"/"false" strings; the file wants YAML booleans. */}}
{{- define "hami-fast.truthy" -}}
{{- if eq (toString .) "true" }}true{{ end }}
{{- end }}

{{- define "hami-fast.deviceConfig.generated" -}}
{{- $v := .Values }}
{{- $tables := .Files.Get "files/device-config-tables.yaml" | fromYaml }}
{{- $overwriteEnv := include "hami-fast.truthy" $v.scheduler.overwriteEnv | eq "true" }}
{{- $dp := $v.devicePlugin }}
{{- $nv := $v.devices.nvidia }}
{{- $nvidia := dict
  "resourceCountName" $v.resourceName
  "resourceMemoryName" $v.resourceMem
  "resourceMemoryPercentageName" $v.resourceMemPercentage
  "resourceCoreName" $v.resourceCores
  "resourcePriorityName" $v.resourcePriority
  "overwriteEnv" $overwriteEnv
  "defaultMemory" $nv.defaultMemory
  "defaultCores" $nv.defaultCores
  "defaultGPUNum" $nv.defaultGPUNum
  "memoryFactor" $nv.memoryFactor
  "gpuCorePolicy" $nv.gpuCorePolicy
  "libCudaLogLevel" $nv.libCudaLogLevel
  "preConfiguredDeviceMemory" $dp.preConfiguredDeviceMemory
  "deviceSplitCount" $dp.deviceSplitCount
  "deviceMemoryScaling" $dp.deviceMemoryScaling
  "deviceCoreScaling" $dp.deviceCoreScaling
  "enableNumaTopology" (include "hami-fast.truthy" $dp.enableNumaTopology | eq "true")
  "runtimeClassName" (toString $dp.runtimeClassName)
  "migProfileAllowlist" $tables.migProfileAllowlist }}
{{- $iluvatars := list }}
{{- range $tables.iluvatarChips }}
{{- $iluvatars = append $iluvatars (dict
  "chipName" . "commonWord" .
  "resourceCountName" (printf "iluvatar.ai/%s-vgpu" .)
  "resourceMemoryName" (printf "iluvatar.ai/%s.vMem" .)
  "resourceCoreName" (printf "iluvatar.ai/%s.vCore" .)) }}
{{- end }}
{{- $ascend := list }}
{{- range $tables.ascendChips }}
{{- $names := dict
  "resourceName" (printf "huawei.com/%s" .commonWord)
  "resourceMemoryName" (printf "huawei.com/%s-memory" .commonWord)
  "resourceCoreName" (printf "huawei.com/%s-core" .commonWord)
  "runtimeClassName" (toString $v.devices.ascend.runtimeClassName)
  "overwriteEnv" $overwriteEnv }}
{{- $ascend = append $ascend (merge $names .) }}
{{- end }}
{{- $config := dict
  "nvidia" $nvidia
  "cambricon" (dict "resourceCountName" $v.mluResourceName "resourceMemoryName" $v.mluResourceMem "resourceCoreName" $v.mluResourceCores)
  "hygon" (dict "resourceCountName" $v.dcuResourceName "resourceMemoryName" $v.dcuResourceMem "resourceCoreName" $v.dcuResourceCores "memoryFactor" 1)
  "metax" (dict
    "resourceCountName" "metax-tech.com/gpu"
    "resourceVCountName" $v.metaxResourceName
    "resourceVMemoryName" $v.metaxResourceMem
    "resourceVCoreName" $v.metaxResourceCore
    "sgpuTopologyAware" (include "hami-fast.truthy" $v.metaxsGPUTopologyAware | eq "true"))
  "enflame" (dict
    "resourceNameGCU" "enflame.com/gcu"
    "resourceNameDRSGCU" $v.enflameResourceNameDRSGCU
    "resourceNameGCUMemory" $v.enflameResourceNameGCUMemory
    "resourceNameGCUCore" $v.enflameResourceNameGCUCore)
  "mthreads" (dict "resourceCountName" "mthreads.com/vgpu" "resourceMemoryName" "mthreads.com/sgpu-memory" "resourceCoreName" "mthreads.com/sgpu-core")
  "iluvatars" $iluvatars
  "kunlun" (dict "resourceCountName" $v.kunlunResourceName "resourceVCountName" $v.kunlunResourceVCountName "resourceVMemoryName" $v.kunlunResourceVMemoryName)
  "awsneuron" (dict "resourceCountName" "aws.amazon.com/neuron" "resourceCoreName" "aws.amazon.com/neuroncore")
  "amd" (dict "resourceCountName" "amd.com/gpu" "resourceCoreName" "amd.com/gpucores" "resourceMemoryName" "amd.com/gpumem")
  "vastai" (dict "resourceCountName" $v.vastaiResourceName)
  "biren" (dict "resourceCountName" $v.birenResourceName)
  "vnpus" (dict "hamiVnpuCore" (include "hami-fast.truthy" $v.devices.ascend.hamiVnpuCore | eq "true") "configs" $ascend) }}
{{- /* sections in HAMi's order, NVIDIA first, for whoever reads the ConfigMap */}}
{{- range list "nvidia" "cambricon" "hygon" "metax" "enflame" "mthreads" "iluvatars" "kunlun" "awsneuron" "amd" "vastai" "biren" "vnpus" }}
{{ . }}:
{{- index $config . | toYaml | nindent 2 }}
{{- end }}
{{- end }}

{{- /* The file's text: HAMi's device-config.content when given, else the one built from values. */}}
{{- define "hami-fast.deviceConfig.text" -}}
{{- $content := index (index .Values "device-config" | default dict) "content" | default "" }}
{{- if trim $content }}{{ $content }}{{ else }}{{ include "hami-fast.deviceConfig.generated" . }}{{ end }}
{{- end }}

{{- /* The config as a map, for the names kube-scheduler hands to the extender. An existing
ConfigMap cannot be read at render time: its names are taken to be the values' ones. */}}
{{- define "hami-fast.deviceConfig.parsed" -}}
{{- $text := include "hami-fast.deviceConfig.generated" . }}
{{- if not .Values.devices.existingConfigMap }}{{ $text = include "hami-fast.deviceConfig.text" . }}{{ end }}
{{- $config := fromYaml $text }}
{{- if hasKey $config "Error" }}
{{- fail (printf "device-config.content: not a YAML mapping: %s" $config.Error) }}
{{- end }}
{{- toJson $config }}
{{- end }}

{{- /* Resource names kube-scheduler leaves to the extender: of each vendor the ones HAMi's chart
lists (a vendor with a switch only while it is on), its `customresources`, and extraManagedResources. */}}
{{- define "hami-fast.managedResourceNames" -}}
{{- $c := include "hami-fast.deviceConfig.parsed" . | fromJson }}
{{- $d := .Values.devices }}
{{- $names := list }}
{{- with $c.nvidia }}{{ $names = concat $names (list .resourceCountName .resourceMemoryName .resourceCoreName .resourceMemoryPercentageName .resourcePriorityName) }}{{ end }}
{{- with $c.cambricon }}{{ $names = append $names .resourceCountName }}{{ end }}
{{- with $c.hygon }}{{ $names = concat $names (list .resourceCountName .resourceMemoryName .resourceCoreName) }}{{ end }}
{{- with $c.metax }}{{ $names = concat $names (list .resourceCountName .resourceVCountName .resourceVCoreName .resourceVMemoryName) }}{{ end }}
{{- if $d.ascend.enabled }}
{{- range (dig "configs" (list) ($c.vnpus | default dict)) }}{{ $names = concat $names (list .resourceName .resourceMemoryName .resourceCoreName) }}{{ end }}
{{- end }}
{{- if $d.mthreads.enabled }}{{ with $c.mthreads }}{{ $names = append $names .resourceCountName }}{{ end }}{{ end }}
{{- if $d.enflame.enabled }}{{ with $c.enflame }}{{ $names = concat $names (list .resourceNameDRSGCU .resourceNameGCUMemory .resourceNameGCUCore .resourceNameGCU) }}{{ end }}{{ end }}
{{- if $d.kunlun.enabled }}{{ with $c.kunlun }}{{ $names = concat $names (list .resourceCountName .resourceVCountName .resourceVMemoryName) }}{{ end }}{{ end }}
{{- with $c.awsneuron }}{{ $names = concat $names (list .resourceCountName .resourceCoreName) }}{{ end }}
{{- if $d.iluvatar.enabled }}
{{- range ($c.iluvatars | default list) }}{{ $names = concat $names (list .resourceCountName .resourceCoreName .resourceMemoryName) }}{{ end }}
{{- end }}
{{- if $d.vastai.enabled }}{{ with $c.vastai }}{{ $names = append $names .resourceCountName }}{{ end }}{{ end }}
{{- if $d.biren.enabled }}{{ with $c.biren }}{{ $names = append $names .resourceCountName }}{{ end }}{{ end }}
{{- with $c.amd }}{{ $names = concat $names (list .resourceCountName .resourceMemoryName .resourceCoreName) }}{{ end }}
{{- range $vendor, $settings := $d }}
{{- if and (kindIs "map" $settings) (ne (toString (dig "enabled" true $settings)) "false") }}
{{- $names = concat $names ($settings.customresources | default list) }}
{{- end }}
{{- end }}
{{- $names = concat $names .Values.scheduler.extender.extraManagedResources }}
{{- toJson ($names | compact | uniq) }}
{{- end }}

{{- /* One source at a time; a content that is not a mapping fails here with its parse error. */}}
{{- define "hami-fast.deviceConfig.validate" -}}
{{- $content := index (index .Values "device-config" | default dict) "content" | default "" }}
{{- if and .Values.devices.existingConfigMap (trim $content) }}
{{- fail "devices.existingConfigMap and device-config.content are both set: keep one (the ConfigMap is mounted as it is)" }}
{{- end }}
{{- $_ := include "hami-fast.deviceConfig.parsed" . }}
{{- end }}

{{/* Pod parts: the flags, the volume and its mount ------------------------------------- */}}
{{- define "hami-fast.deviceConfig.args" -}}
- --device-config-file={{ include "hami-fast.deviceConfig.file" . }}
- --enable-ascend={{ include "hami-fast.truthy" .Values.devices.ascend.enabled | eq "true" }}
- --enable-iluvatar={{ include "hami-fast.truthy" .Values.devices.iluvatar.enabled | eq "true" }}
{{- end }}

{{- define "hami-fast.deviceConfig.volume" -}}
- name: device-config
  configMap:
    name: {{ include "hami-fast.deviceConfig.configMapName" . }}
    items:
      - key: {{ include "hami-fast.deviceConfig.key" . | quote }}
        path: device-config.yaml
{{- end }}

{{- define "hami-fast.deviceConfig.mount" -}}
- name: device-config
  mountPath: {{ include "hami-fast.deviceConfig.mountDir" . }}
  readOnly: true
{{- end }}

{{- /* Restarts the pods when the rendered config changes (an existing ConfigMap: when renamed). */}}
{{- define "hami-fast.deviceConfig.checksum" -}}
{{- if .Values.devices.existingConfigMap }}
{{- printf "%s/%s" .Values.devices.existingConfigMap .Values.devices.existingConfigMapKey | sha256sum }}
{{- else }}
{{- include "hami-fast.deviceConfig.text" . | sha256sum }}
{{- end }}
{{- end }}
