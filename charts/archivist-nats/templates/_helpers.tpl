{{/* The NATS chart's Services' name (nats.fullnameOverride). */}}
{{- define "archivistNATS.fullname" -}}
{{ .Values.nats.fullnameOverride | default "nats" }}
{{- end -}}

{{/* Labels of every object this chart makes itself. */}}
{{- define "archivistNATS.labels" -}}
app.kubernetes.io/name: archivist-nats
app.kubernetes.io/part-of: archivist
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The NATS servers' pods (the official chart's labels). */}}
{{- define "archivistNATS.servers" -}}
matchLabels: {app.kubernetes.io/name: nats, app.kubernetes.io/instance: {{ .Release.Name }}, app.kubernetes.io/component: nats}
{{- end -}}
