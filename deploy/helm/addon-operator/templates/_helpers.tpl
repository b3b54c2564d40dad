{{/* The name of every object: the release's name. */}}
{{- define "addon-operator.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Cluster-scoped objects are named after the namespace too (one per release). */}}
{{- define "addon-operator.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "addon-operator.labels" -}}
app: {{ include "addon-operator.name" . }}
app.kubernetes.io/name: addon-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "addon-operator.configMap" -}}
{{- default (include "addon-operator.name" .) .Values.config.existingConfigMap -}}
{{- end -}}
