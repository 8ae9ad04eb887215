# Helpers of the chart's templates. The templates use a small subset of Helm's template language
# (tests/helm/render.py renders it in CI, where there is no helm): no printf, trunc or lookup.

# The objects' name: fullnameOverride, else the release's name for the chart.
{{- define "code-interpreter.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{ .Values.fullnameOverride }}
{{- else -}}
{{- if eq .Release.Name .Chart.Name -}}
{{ .Chart.Name }}
{{- else -}}
{{ .Release.Name }}-{{ .Chart.Name }}
{{- end -}}
{{- end -}}
{{- end }}

# Labels of every object; kustomize's part-of included.
{{- define "code-interpreter.labels" -}}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: Helm
app.kubernetes.io/part-of: code-interpreter
{{- end }}

# The daemon's pods. `app` and `component` as in packaging/kubernetes (the executor pods carry
# app=code-interpreter with component executor or session, never daemon); the instance keeps
# two releases in one namespace apart.
{{- define "code-interpreter.selectorLabels" -}}
app: code-interpreter
component: daemon
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "code-interpreter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ default (include "code-interpreter.fullname" .) .Values.serviceAccount.name }}
{{- else -}}
{{ required "serviceAccount.name: the daemon's ServiceAccount, when serviceAccount.create is false"
  .Values.serviceAccount.name }}
{{- end -}}
{{- end }}

# The Secret holding the API keys file; empty when there are no API keys.
{{- define "code-interpreter.apiKeysSecret" -}}
{{- if .Values.apiKeys.existingSecret -}}
{{ .Values.apiKeys.existingSecret }}
{{- else -}}
{{- if .Values.apiKeys.create -}}
{{ include "code-interpreter.fullname" . }}-api-keys
{{- end -}}
{{- end -}}
{{- end }}

# The API keys file rendered from apiKeys.keys: one `NAME KEY [LIMITS]` line each.
{{- define "code-interpreter.apiKeysFile" -}}
# code-interpreter API keys (docs/api.md "API keys"), rendered by the Helm chart
{{- range .Values.apiKeys.keys }}
{{ required "apiKeys.keys[]: every entry needs a name" .name }} {{ required
  "apiKeys.keys[]: every entry needs a key" .key }}{{ with .limits }} {{ . }}{{ end }}
{{- end }}
{{ end }}

# Values the templates cannot express: refused with what to set instead.
{{- define "code-interpreter.checks" -}}
{{- if and (ne .Values.sandboxApi "pods") (ne .Values.sandboxApi "agent-sandbox") -}}
{{- fail "sandboxApi: must be pods or agent-sandbox" -}}
{{- end -}}
{{- if and (eq .Values.sandboxApi "agent-sandbox") .Values.warmPool.shared -}}
{{- fail
  "warmPool.shared: with sandboxApi agent-sandbox the warm pools are SandboxWarmPools, shared by every replica already; set it false" -}}
{{- end -}}
{{- if and .Values.apiKeys.create .Values.apiKeys.existingSecret -}}
{{- fail "apiKeys: set either existingSecret or create, not both" -}}
{{- end -}}
{{- if and .Values.apiKeys.create (not .Values.apiKeys.keys) -}}
{{- fail "apiKeys.create: apiKeys.keys is empty; give at least one {name, key}" -}}
{{- end -}}
{{- end }}
