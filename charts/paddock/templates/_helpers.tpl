{{/* The release's full name, at most 63 characters. */}}
{{- define "paddock.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "paddock.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The MCP server's pods: a name of their own, so the operator's selectors never match them. */}}
{{- define "paddock.mcpSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-mcp
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "paddock.mcpLabels" -}}
{{ include "paddock.mcpSelectorLabels" . }}
app.kubernetes.io/component: mcp
app.kubernetes.io/part-of: paddock
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "paddock.consoleSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-console
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "paddock.consoleLabels" -}}
{{ include "paddock.consoleSelectorLabels" . }}
app.kubernetes.io/component: console
app.kubernetes.io/part-of: paddock
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "paddock.labels" -}}
{{ include "paddock.selectorLabels" . }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: paddock
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The default image of sandboxes: the one given, else the sandbox image published next to the
operator's, at the same tag. */}}
{{- define "paddock.sandboxImage" -}}
{{- if .Values.operator.sandboxImage -}}
{{ .Values.operator.sandboxImage }}
{{- else -}}
{{ .Values.image.repository }}-sandbox:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The operator image: by digest when one is given, else by tag. */}}
{{- define "paddock.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "paddock.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "paddock.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The operator's permissions: the same rules as config/rbac/role.yaml (a test compares them).
Namespaced ones; the cluster-scoped reads kopf needs are in "paddock.clusterRules".
*/}}
{{- define "paddock.namespacedRules" -}}
- apiGroups: [paddock.dev]
  resources: [workspaces]
  verbs: [get, list, watch, patch]
- apiGroups: [paddock.dev]
  resources: [agentruns]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [paddock.dev]
  resources: [sandboxpolicies]
  verbs: [get, list, watch, patch]
- apiGroups: [paddock.dev]
  resources: [sandboxes]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [paddock.dev]
  resources: [sandboxpools]
  verbs: [get, list, watch]
- apiGroups: [paddock.dev]
  resources: [workspaces/status, sandboxpolicies/status, sandboxes/status, sandboxpools/status, agentruns/status]
  verbs: [patch]
- apiGroups: [paddock.dev]
  resources: [sandboxes/finalizers, agentruns/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [pods/exec]
  verbs: [get, create]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
- apiGroups: [""]
  resources: [events]
  verbs: [create, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [snapshot.storage.k8s.io]
  resources: [volumesnapshots]
  verbs: [get, list, watch, create, delete]
{{- if .Values.highAvailability.enabled }}
- apiGroups: [kopf.dev]
  resources: [kopfpeerings]
  verbs: [get, list, watch, patch]
{{- end }}
{{- end -}}

{{- define "paddock.clusterRules" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [nodes]
  verbs: [list, watch]
- apiGroups: [snapshot.storage.k8s.io]
  resources: [volumesnapshotclasses]
  verbs: [list, watch]
- apiGroups: [storage.k8s.io]
  resources: [storageclasses]
  verbs: [list, watch]
{{- if .Values.highAvailability.enabled }}
- apiGroups: [kopf.dev]
  resources: [clusterkopfpeerings]
  verbs: [get, list, watch, patch]
{{- end }}
{{- end -}}

{{/* The egress gateway's pods: a name of their own. */}}
{{- define "paddock.gatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "paddock.gatewayLabels" -}}
{{ include "paddock.gatewaySelectorLabels" . }}
app.kubernetes.io/component: gateway
app.kubernetes.io/part-of: paddock
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The gateway image: the one given, else the one published next to the operator's. */}}
{{- define "paddock.gatewayImage" -}}
{{- if .Values.gateway.image -}}
{{ .Values.gateway.image }}
{{- else -}}
{{ .Values.image.repository }}-gateway:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The proxy URL sandboxes are given: the Service's fixed address when one is set (a
sandbox without DNS reaches it then), else its name. */}}
{{- define "paddock.gatewayProxy" -}}
{{- $host := default (printf "%s-gateway.%s.svc" (include "paddock.fullname" .) .Release.Namespace) .Values.gateway.clusterIP -}}
http://{{ $host }}:{{ .Values.gateway.port }}
{{- end -}}

{{/* The gateway's model route, as sandboxes reach it. */}}
{{- define "paddock.gatewayModelURL" -}}
{{- $host := default (printf "%s-gateway.%s.svc" (include "paddock.fullname" .) .Release.Namespace) .Values.gateway.clusterIP -}}
http://{{ $host }}:{{ .Values.gateway.modelPort }}
{{- end -}}
