{{/* Names ------------------------------------------------------------------------------ */}}
{{- define "hami-fast.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hami-fast.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hami-fast.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "hami-fast.scheduler" -}}
{{- printf "%s-scheduler" (include "hami-fast.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hami-fast.scheduler.tls" -}}
{{- printf "%s-scheduler-tls" (include "hami-fast.fullname" .) }}
{{- end }}

{{- define "hami-fast.webhook" -}}
{{- printf "%s-webhook" (include "hami-fast.fullname" .) }}
{{- end }}

{{- define "hami-fast.certgen" -}}
{{- printf "%s-certgen" (include "hami-fast.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hami-fast.descheduler" -}}
{{- printf "%s-descheduler" (include "hami-fast.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hami-fast.descheduler.webhook" -}}
{{- printf "%s-descheduler-webhook" (include "hami-fast.fullname" .) }}
{{- end }}

{{- define "hami-fast.scheduler.serviceAccountName" -}}
{{- if .Values.scheduler.serviceAccount.create }}
{{- default (include "hami-fast.scheduler" .) .Values.scheduler.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.scheduler.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hami-fast.descheduler.serviceAccountName" -}}
{{- if .Values.descheduler.serviceAccount.create }}
{{- default (include "hami-fast.descheduler" .) .Values.descheduler.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.descheduler.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Labels ----------------------------------------------------------------------------- */}}
{{- define "hami-fast.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "hami-fast.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "hami-fast.scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hami-fast.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: hami-scheduler
{{- end }}

{{- define "hami-fast.descheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hami-fast.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gpu-descheduler
app: gpu-descheduler-webhook
{{- end }}

{{/* Images: registry/repository:tag with global fallbacks ---------------------------- */}}
{{- define "hami-fast.image" -}}
{{- $img := index . 0 }}{{- $root := index . 1 }}{{- $defaultTag := index . 2 }}
{{- $registry := default $img.registry $root.Values.global.imageRegistry }}
{{- $tag := default $defaultTag $img.tag }}
{{- if $registry }}{{ printf "%s/%s:%s" $registry $img.repository $tag }}{{ else }}{{ printf "%s:%s" $img.repository $tag }}{{ end }}
{{- end }}

{{- define "hami-fast.appTag" -}}
{{- default (printf "v%s" .Chart.AppVersion) .Values.global.imageTag }}
{{- end }}

{{- define "hami-fast.extender.image" -}}
{{- include "hami-fast.image" (list .Values.scheduler.extender.image . (include "hami-fast.appTag" .)) }}
{{- end }}

{{- define "hami-fast.kubeScheduler.image" -}}
{{- $tag := .Capabilities.KubeVersion.Version | splitList "+" | first }}
{{- include "hami-fast.image" (list .Values.scheduler.kubeScheduler.image . $tag) }}
{{- end }}

{{- define "hami-fast.descheduler.image" -}}
{{- $base := .Values.scheduler.extender.image }}
{{- $img := dict "registry" (default $base.registry .Values.descheduler.image.registry) "repository" (default $base.repository .Values.descheduler.image.repository) "tag" (default $base.tag .Values.descheduler.image.tag) }}
{{- include "hami-fast.image" (list $img . (include "hami-fast.appTag" .)) }}
{{- end }}

{{- define "hami-fast.certgen.image" -}}
{{- include "hami-fast.image" (list .Values.scheduler.patch.image . "v1.5.2") }}
{{- end }}

{{- define "hami-fast.imagePullSecrets" -}}
{{- $root := index . 0 }}
{{- $names := list }}
{{- range $root.Values.global.imagePullSecrets }}{{ $names = append $names . }}{{ end }}
{{- range (rest .) }}{{ range . }}{{ $names = append $names . }}{{ end }}{{ end }}
{{- with ($names | uniq) }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* Managed resources kube-scheduler hands to the extender -------------------------- */}}
{{- define "hami-fast.managedResources" -}}
{{- range include "hami-fast.managedResourceNames" . | fromJsonArray }}
- name: {{ . | quote }}
  ignoredByScheduler: true
{{- end }}
{{- end }}

{{/* TLS: whether the extender serves HTTPS (the webhook needs it) ---------------------- */}}
{{- define "hami-fast.tls" -}}
{{- if or .Values.scheduler.admissionWebhook.enabled (and .Values.descheduler.enabled .Values.descheduler.webhook.enabled) }}true{{ end }}
{{- end }}

{{/* Whether the descheduler's API serves HTTPS (descheduler.api.tls.enabled) */}}
{{- define "hami-fast.descheduler.apiTLS" -}}
{{- if and .Values.descheduler.enabled .Values.descheduler.api.tls.enabled }}true{{ end }}
{{- end }}

{{/* Whether the chart issues the serving certificate: for a webhook or the descheduler's API */}}
{{- define "hami-fast.certs" -}}
{{- if or (include "hami-fast.tls" .) (include "hami-fast.descheduler.apiTLS" .) }}true{{ end }}
{{- end }}

{{- define "hami-fast.certgenEnabled" -}}
{{- if and (include "hami-fast.certs" .) .Values.scheduler.patch.enabled (not .Values.scheduler.certManager.enabled) }}true{{ end }}
{{- end }}

{{/* DNS names the serving certificate covers ----------------------------------------- */}}
{{- define "hami-fast.certHosts" -}}
{{- $ns := include "hami-fast.namespace" . }}
{{- $hosts := list }}
{{- range $svc := list (include "hami-fast.scheduler" .) (include "hami-fast.descheduler" .) }}
{{- $hosts = concat $hosts (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) }}
{{- end }}
{{- if .Values.scheduler.admissionWebhook.customURL.enabled }}
{{- $hosts = append $hosts (toString .Values.scheduler.admissionWebhook.customURL.host) }}
{{- end }}
{{- join "," $hosts }}
{{- end }}

{{/* Webhook selectors: HAMi's opt-out label plus the user's -------------------------- */}}
{{- define "hami-fast.webhookSelector" -}}
{{- $sel := index . 0 }}{{- $extra := index . 1 }}
{{- $exprs := list (dict "key" "hami.io/webhook" "operator" "NotIn" "values" (list "ignore")) }}
{{- range $extra }}{{ $exprs = append $exprs . }}{{ end }}
{{- range ($sel.matchExpressions | default list) }}{{ $exprs = append $exprs . }}{{ end }}
{{- with $sel.matchLabels }}
matchLabels:
  {{- toYaml . | nindent 2 }}
{{- end }}
matchExpressions:
  {{- toYaml $exprs | nindent 2 }}
{{- end }}
