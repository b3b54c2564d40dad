{{/* The name of every object: the release's name. */}}
{{- define "shell-operator.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Cluster-scoped objects are named after the namespace too (one per release). */}}
{{- define "shell-operator.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "shell-operator.labels" -}}
app: {{ include "shell-operator.name" . }}
app.kubernetes.io/name: shell-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "shell-operator.hooksConfigMap" -}}
{{- default (printf "%s-hooks" (include "shell-operator.name" .)) .Values.hooks.existingConfigMap -}}
{{- end -}}
