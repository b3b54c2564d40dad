{{- define "rbac-app.name" -}}{{ .Release.Name }}-app{{- end -}}
{{- define "rbac-app.labels" -}}
app.kubernetes.io/name: rbac-app
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
