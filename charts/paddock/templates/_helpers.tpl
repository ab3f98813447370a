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

{{- define "paddock.labels" -}}
{{ include "paddock.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
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
  resources: [workspaces, sandboxpolicies, agentruns]
  verbs: [get, list, watch, patch, update]
- apiGroups: [paddock.dev]
  resources: [sandboxes]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [paddock.dev]
  resources:
    - workspaces/status
    - sandboxpolicies/status
    - sandboxes/status
    - agentruns/status
    - workspaces/finalizers
    - sandboxes/finalizers
    - agentruns/finalizers
  verbs: [get, patch, update]
- apiGroups: [""]
  resources: [pods, persistentvolumeclaims]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [pods/exec]
  verbs: [create, get]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, update, patch, delete]
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
  verbs: [get, list, watch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
- apiGroups: [snapshot.storage.k8s.io]
  resources: [volumesnapshotclasses]
  verbs: [get, list, watch]
{{- if .Values.highAvailability.enabled }}
- apiGroups: [kopf.dev]
  resources: [clusterkopfpeerings]
  verbs: [get, list, watch, patch]
{{- end }}
{{- end -}}
