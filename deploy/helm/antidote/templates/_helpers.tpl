{{- define "antidote.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "antidote.fullname" -}}
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

{{- define "antidote.selectorLabels" -}}
app.kubernetes.io/name: {{ include "antidote.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "antidote.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "antidote.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret of the release: an existing one, or the one the chart makes. */}}
{{- define "antidote.secretName" -}}
{{- if .Values.secret.name }}{{ .Values.secret.name }}{{ else if .Values.secret.create }}{{ include "antidote.fullname" . }}{{ end }}
{{- end }}

{{/* The pipelines file: .Values.config with the admin block the probes and the metrics port rely on. */}}
{{- define "antidote.config" -}}
{{- if hasKey .Values.config "admin" }}
{{- fail "config.admin: leave it out; the chart sets it from .Values.admin (port, openReads) so that the probes and the metrics port match" }}
{{- end }}
{{- if not .Values.config.pipelines }}
{{- fail "config.pipelines: required: at least one pipeline (see cmd/antidote/examples/README.md)" }}
{{- end }}
{{- $admin := dict "address" (printf ":%d" (int .Values.admin.port)) "allow-remote" true "open-reads" .Values.admin.openReads }}
{{- toYaml (merge (dict "admin" $admin) .Values.config) }}
{{- end }}

{{- define "antidote.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
