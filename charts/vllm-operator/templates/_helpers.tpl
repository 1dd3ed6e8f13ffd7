{{/* Names, labels and the small computations every template shares. */}}

{{- define "vllm-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "vllm-operator.fullname" -}}
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

{{- define "vllm-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vllm-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "vllm-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: vllm-operator
{{- end }}

{{- define "vllm-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "vllm-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image; a digest wins over the tag. */}}
{{- define "vllm-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "vllm-operator.benchImage" -}}
{{- default (include "vllm-operator.image" .) .Values.operator.benchImage }}
{{- end }}

{{/* Watched namespaces in `namespaces` scope, as a JSON list (the release namespace when empty). */}}
{{- define "vllm-operator.watchedNamespaces" -}}
{{- if .Values.operator.namespaces }}
{{- .Values.operator.namespaces | uniq | toJson }}
{{- else }}
{{- list .Release.Namespace | toJson }}
{{- end }}
{{- end }}

{{/* The autoscalers the operator may manage (its --autoscaling-engines), as the RBAC grants. */}}
{{- define "vllm-operator.autoscalingEngines" -}}
{{- $engines := list }}
{{- if .Values.autoscaling.enabled }}{{ $engines = append $engines "hpa" }}{{ end }}
{{- if .Values.autoscaling.keda }}{{ $engines = append $engines "keda" }}{{ end }}
{{- default "none" (join "," $engines) }}
{{- end }}

{{/* Namespaces that get a benchmark NetworkPolicy, as a JSON list. */}}
{{- define "vllm-operator.benchmarkNamespaces" -}}
{{- if .Values.networkPolicy.benchmark.namespaces }}
{{- .Values.networkPolicy.benchmark.namespaces | uniq | toJson }}
{{- else if eq .Values.operator.scope "namespaces" }}
{{- include "vllm-operator.watchedNamespaces" . }}
{{- else }}
{{- list | toJson }}
{{- end }}
{{- end }}

{{/*
The RBAC rules: exactly the calls in vllm_operator/kube/permissions.py (PERMISSIONS), which
the kube layer enforces; tests/unit/chart/test_rbac.py fails when they differ in either
direction. No wildcard, no Secrets, no ConfigMaps; events: create only.
*/}}
{{- define "vllm-operator.rules" -}}
# The custom resource: kopf lists and watches it (the operator reads it from that cache);
# the operator patches it (handled promote/abort/rerun requests) and its status.
- apiGroups: ["vllm-operator.dev"]
  resources: ["vllmdeployments"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["vllm-operator.dev"]
  resources: ["vllmdeployments/status"]
  verbs: ["patch"]
# Children carry ownerReferences with blockOwnerDeletion: true; clusters that enforce
# OwnerReferencesPermissionEnforcement (OpenShift by default) require update on the
# owner's finalizers subresource to create them.
- apiGroups: ["vllm-operator.dev"]
  resources: ["vllmdeployments/finalizers"]
  verbs: ["update"]
# One Deployment per revision: create a candidate, scale it and set its role, remove
# rejected and retired revisions; kopf watches readiness. get: who holds a name the
# operator is about to create (a child name held by another object is a Stalled condition).
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# The serving, candidate and twin Services; promotion patches the serving selector; the
# twin's Service is deleted when its gate ends; kopf watches them for the cache.
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Benchmark Jobs.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "delete"]
# One PodDisruptionBudget per serving revision (spec.disruption); removed with its revision.
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
{{- if .Values.multiNode.enabled }}
# One LeaderWorkerSet per multi-node revision (spec.resources.nodes > 1), in place of its
# Deployment: the same verbs, for the same reasons (needs LeaderWorkerSet installed).
- apiGroups: ["leaderworkerset.x-k8s.io"]
  resources: ["leaderworkersets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
{{- end }}
{{- if .Values.autoscaling.enabled }}
# The HorizontalPodAutoscaler of the serving revision (spec.autoscaling, engine hpa).
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
{{- end }}
{{- if .Values.autoscaling.keda }}
# The KEDA ScaledObject of the serving revision (spec.autoscaling, engine keda).
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
{{- end }}
# A canary with traffic.mode gatewayAPI: read the HTTPRoute the spec names and set the
# weights of its backends (stable and candidate Services). Nothing else of it is touched.
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes"]
  verbs: ["get", "patch"]
# Pods: why a candidate or a benchmark pod does not run; the benchmark log as a fallback.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
# Events on the resource (kopf and the operator post them).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/*
Cluster-scoped rules (PERMISSIONS entries whose resource has no namespace): a ClusterRole in
every scope. Nodes, get only: the GPU product label of the nodes a gate's pods ran on.
With multiNode.enabled, kopf lists and watches the CRDs (read-only), so a LeaderWorkerSet
CRD installed after the operator started is watched without a restart.
*/}}
{{- define "vllm-operator.clusterRules" -}}
{{- if .Values.rbac.nodes }}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get"]
{{- end }}
{{- if .Values.multiNode.enabled }}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- end }}
{{- end }}
