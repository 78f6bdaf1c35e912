{{/*
Names. Every helper is prefixed with the chart name.
*/}}
{{- define "jbod-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "jbod-operator.fullname" -}}
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

{{- define "jbod-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels: every object of the release carries these; the selector labels are a stable subset.
*/}}
{{- define "jbod-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "jbod-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "jbod-operator.labels" -}}
helm.sh/chart: {{ include "jbod-operator.chart" . }}
{{ include "jbod-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: jbod-operator
{{- end }}

{{- define "jbod-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "jbod-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "jbod-operator.leaseName" -}}
{{- default (printf "%s-leader" (include "jbod-operator.fullname" .)) .Values.leaderElection.leaseName }}
{{- end }}

{{/*
The operator image: repository@digest when a digest is given, else repository:tag (appVersion).
*/}}
{{- define "jbod-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The URL brokers call (JBOD_OPERATOR_CONTROLLER_URL): the Service, which routes to the Ready,
that is the active, operator.
*/}}
{{- define "jbod-operator.controllerUrl" -}}
{{- printf "http://%s.%s.svc:%d" (include "jbod-operator.fullname" .) .Release.Namespace (int .Values.service.port) }}
{{- end }}

{{/*
The namespace of the BrokerCluster rendered from values.
*/}}
{{- define "jbod-operator.brokerClusterNamespace" -}}
{{- $ns := .Values.brokerCluster.namespace | default .Values.watchNamespace | default .Release.Namespace }}
{{- if and .Values.watchNamespace (ne $ns .Values.watchNamespace) }}
{{- fail (printf "brokerCluster.namespace %q is not watched: the operator watches only %q (watchNamespace)" $ns .Values.watchNamespace) }}
{{- end }}
{{- $ns }}
{{- end }}

{{/*
The rules of the operator's workload role (ClusterRole, or Role in watchNamespace), derived from
what the code calls (operator/jbod_operator/clients/kube.py records each call) plus what kopf needs for
the resources it serves. tests/unit/test_chart_templates.py compares them with the code.
*/}}
{{- define "jbod-operator.workloadRules" -}}
# kopf lists and watches the resources it serves and patches their annotations and finalizers;
# the handlers read them (get) and write their status.
- apiGroups: ["jbod.io"]
  resources: ["brokerclusters"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["jbod.io"]
  resources: ["brokerclusters/status"]
  verbs: ["patch"]
# Owned objects carry ownerReferences with blockOwnerDeletion: where the
# OwnerReferencesPermissionEnforcement admission plugin runs, that needs update on the owner's
# finalizers subresource.
- apiGroups: ["jbod.io"]
  resources: ["brokerclusters/finalizers"]
  verbs: ["update"]
- apiGroups: ["jbod.io"]
  resources: ["topics"]
  verbs: ["get", "list", "watch", "patch"]
# The partition state of record is replaced with its resourceVersion (a concurrent writer
# gets 409); conditions are merge-patched.
- apiGroups: ["jbod.io"]
  resources: ["topics/status"]
  verbs: ["patch", "update"]
# The partition state of record (issue 39): PartitionShards owned by their Topic, created,
# replaced with their resourceVersion, watched (the operator's cache; kopf may patch what it
# watches) and deleted with it.
- apiGroups: ["jbod.io"]
  resources: ["partitionshards"]
  verbs: ["get", "list", "watch", "patch", "create", "update", "delete"]
# Each pass reads its LogDirMove afresh (get): the body an event carried may be stale.
- apiGroups: ["jbod.io"]
  resources: ["logdirmoves"]
  verbs: ["get", "list", "watch", "patch", "create"]
- apiGroups: ["jbod.io"]
  resources: ["logdirmoves/status"]
  verbs: ["patch"]
# PartitionReassignments: read afresh on each pass, their status merge-patched; the Topics'
# partition states (above) carry their steps.
# A Rebalance creates its children (PartitionReassignments above, LogDirMoves) and cancels
# them by patching spec.cancel.
- apiGroups: ["jbod.io"]
  resources: ["partitionreassignments"]
  verbs: ["get", "list", "watch", "patch", "create"]
- apiGroups: ["jbod.io"]
  resources: ["partitionreassignments/status"]
  verbs: ["patch"]
# Rebalances: read afresh on each pass, the command annotation removed once acted on (patch),
# their status merge-patched; continuous detection lists a cluster's Rebalances (never two at
# once) and creates one when a trigger holds.
- apiGroups: ["jbod.io"]
  resources: ["rebalances"]
  verbs: ["get", "list", "watch", "patch", "create"]
- apiGroups: ["jbod.io"]
  resources: ["rebalances/status"]
  verbs: ["patch"]
# KafkaClusters (a Kafka cluster the operator does not run): kopf follows each with a daemon;
# each refresh reads it afresh and merge-patches its status. Their SASL/TLS Secrets are read
# with the secrets rule below.
- apiGroups: ["jbod.io"]
  resources: ["kafkaclusters"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["jbod.io"]
  resources: ["kafkaclusters/status"]
  verbs: ["patch"]
# The brokers' objects, by server-side apply: a PATCH, which needs create as well when the
# object does not exist yet. A StatefulSet is read first and deleted (orphaning its pods and
# PVCs) to change its volumeClaimTemplates when a log dir is added.
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "create", "patch", "delete"]
# ConfigMaps: the brokers' (server-side apply) and each Rebalance's proposal, read back when
# it is approved.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["create", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["create", "patch"]
# A Rebalance's planning job: a SparkApplication where the Spark Operator serves its API, else a
# batch/v1 Job (JBOD_OPERATOR_REBALANCE_LAUNCHER), in the Rebalance's namespace and owned by it;
# created, followed (get) and deleted once its plan is read or the Rebalance stops.
- apiGroups: ["sparkoperator.k8s.io"]
  resources: ["sparkapplications"]
  verbs: ["get", "create", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create", "delete"]
# Each cluster's token Secret: read, and created once when missing.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create"]
# Events on the served resources (kopf's and the operator's own).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/*
Spark placement job names.
*/}}
{{- define "jbod-operator.sparkName" -}}
{{- default (printf "%s-placement" (include "jbod-operator.fullname" .)) .Values.spark.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "jbod-operator.sparkServiceAccountName" -}}
{{- if .Values.spark.serviceAccount.create }}
{{- default (printf "%s-spark" (include "jbod-operator.fullname" .)) .Values.spark.serviceAccount.name }}
{{- else }}
{{- required "spark.serviceAccount.name is required when spark.serviceAccount.create is false" .Values.spark.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "jbod-operator.sparkImage" -}}
{{- printf "%s:%s" .Values.spark.image.repository (default .Chart.AppVersion .Values.spark.image.tag) }}
{{- end }}

{{- define "jbod-operator.sparkApiPresent" -}}
{{- if .Capabilities.APIVersions.Has "sparkoperator.k8s.io/v1beta2/SparkApplication" }}true{{ end }}
{{- end }}

{{/*
A CRD from files/crds/ (a copy of the repository's crds/, checked equal by the unit tests),
with the chart's labels and, unless crds.keep is false, helm.sh/resource-policy: keep.
Usage: include "jbod-operator.crd" (list . "files/crds/<file>.yaml")
*/}}
{{- define "jbod-operator.crd" -}}
{{- $root := index . 0 }}
{{- $file := index . 1 }}
{{- $text := $root.Files.Get $file }}
{{- if not $text }}
{{- fail (printf "%s is missing from the chart" $file) }}
{{- end }}
{{- $crd := fromYaml $text }}
apiVersion: {{ $crd.apiVersion }}
kind: {{ $crd.kind }}
metadata:
  name: {{ $crd.metadata.name }}
  labels:
    {{- include "jbod-operator.labels" $root | nindent 4 }}
  {{- if $root.Values.crds.keep }}
  annotations:
    helm.sh/resource-policy: keep
  {{- end }}
spec:
  {{- toYaml $crd.spec | nindent 2 }}
{{- end }}
