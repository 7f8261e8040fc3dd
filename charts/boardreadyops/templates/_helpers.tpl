{{/* Chart name. */}}
{{- define "boardreadyops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Resource name prefix: release name, plus the chart name unless the release name holds it.
At most 37 characters (values.schema.json holds fullnameOverride to the same): the longest object
name, the dispatcher's metrics Service <fullname>-outbox-dispatcher-metrics, adds 26, and a
Service's name is a DNS-1035 label of at most 63 (charttest TestNamesFitTheirLimits). */}}
{{- define "boardreadyops.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 37 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 37 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 37 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of one component's objects: <fullname>-<component>. */}}
{{- define "boardreadyops.componentName" -}}
{{- printf "%s-%s" (include "boardreadyops.fullname" .root) .component -}}
{{- end -}}

{{/* Selector labels of one component. Call with (dict "root" $ "component" "ingest"). */}}
{{- define "boardreadyops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "boardreadyops.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Every label of one component. */}}
{{- define "boardreadyops.labels" -}}
{{ include "boardreadyops.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: boardreadyops
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Image of one service binary. */}}
{{- define "boardreadyops.image" -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .image (default .root.Chart.AppVersion .root.Values.image.tag) -}}
{{- end -}}

{{/* Required value with a message that names it. */}}
{{- define "boardreadyops.required" -}}
{{- required (printf "%s is required: %s" .name .why) .value -}}
{{- end -}}

{{/* Restricted Pod Security Standard: pod level. */}}
{{- define "boardreadyops.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Restricted Pod Security Standard: container level. */}}
{{- define "boardreadyops.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Environment every service shares. */}}
{{- define "boardreadyops.commonEnv" -}}
- name: METRICS_ADDR
  value: ":9090"
- name: LOG_LEVEL
  value: {{ .Values.logging.level | quote }}
- name: LOG_FORMAT
  value: {{ .Values.logging.format | quote }}
{{- if .Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.tracing.otlpEndpoint | quote }}
- name: OTEL_TRACES_SAMPLER
  value: parentbased_traceidratio
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .Values.tracing.samplingRatio | quote }}
{{- end }}
{{- end -}}

{{/* DATABASE_URL from the database Secret. Call with (dict "root" $ "key" "ingest"). */}}
{{- define "boardreadyops.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "boardreadyops.required" (dict "name" "database.existingSecret" "why" "a Secret with one PostgreSQL URL per database role" "value" .root.Values.database.existingSecret) }}
      key: {{ index .root.Values.database.keys .key }}
{{- end -}}

{{/* A Go duration value ("90s", "1m30s", "1.5h", "0") in nanoseconds, as Go's time.ParseDuration
reads it, so that the chart can hold a duration to the bounds the services enforce at startup (Helm
has no duration parser). Fails naming the value when it is not a duration or beyond Go's range.
Call with (dict "name" "ingest.storeTimeout" "value" .Values.ingest.storeTimeout). */}}
{{- define "boardreadyops.durationNs" -}}
{{- $s := toString .value -}}
{{- if not (regexMatch "^(0|([0-9]+(\\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+)$" $s) -}}
{{- fail (printf "%s (%q) is not a duration: write e.g. 500ms, 30s, 5m or 1h30m" .name $s) -}}
{{- end -}}
{{- $units := dict "ns" 1 "us" 1000 "µs" 1000 "μs" 1000 "ms" 1000000 "s" 1000000000 "m" 60000000000 "h" 3600000000000 -}}
{{- $max := 9223372036854775807 -}}
{{- $tooLong := printf "%s (%s) is out of range: a duration is at most 2562047h47m16.854775807s" .name $s -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h)" $s -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" . -}}
{{- $unit := get $units (trimPrefix $num .) | int64 -}}
{{- /* Leading zeros dropped: int64 would read "010" as octal. */ -}}
{{- $int := regexReplaceAll "^0+([0-9])" (regexFind "^[0-9]+" $num) "${1}" -}}
{{- if or (gt (len $int) 19) (and (eq (len $int) 19) (gt $int "9223372036854775807")) }}{{ fail $tooLong }}{{ end -}}
{{- $v := $int | int64 -}}
{{- if gt $v (div $max $unit) }}{{ fail $tooLong }}{{ end -}}
{{- $v = mul $v $unit -}}
{{- $frac := trimPrefix "." (regexFind "\\.[0-9]+" $num) -}}
{{- if $frac -}}
{{- /* fraction × unit / 10^digits, truncated to the nanosecond (Go computes it in float64, which
can come out 1ns lower for a long fraction; charttest compares the two). */ -}}
{{- $frac = trunc 18 $frac -}}
{{- $f := mulf $frac (divf $unit (printf "1%s" (repeat (len $frac) "0"))) | int64 -}}
{{- if gt $f (sub $max $v) }}{{ fail $tooLong }}{{ end -}}
{{- $v = add $v $f -}}
{{- end -}}
{{- if gt $v (sub $max $total) }}{{ fail $tooLong }}{{ end -}}
{{- $total = add $total $v -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* A duration value held to the bounds a service enforces at startup, in nanoseconds; fails
with "<name> (<value>) must be <want>: <why>" outside [min, max]. Call with
(dict "name" "ingest.storeTimeout" "value" $v.storeTimeout "min" 1 "max" 9000000000
"want" "more than 0 and at most 9s" "why" "ingest refuses anything else at startup"). */}}
{{- define "boardreadyops.durationWithin" -}}
{{- $ns := include "boardreadyops.durationNs" . | int64 -}}
{{- if or (lt $ns (int64 .min)) (gt $ns (int64 .max)) -}}
{{- fail (printf "%s (%s) must be %s: %s" .name (toString .value) .want .why) -}}
{{- end -}}
{{- $ns -}}
{{- end -}}

{{/* Grace period: the configured one, else the lease plus 30 s so a draining replica can
finish or release every lease it holds. */}}
{{- define "boardreadyops.gracePeriod" -}}
{{- if .terminationGracePeriodSeconds -}}
{{- .terminationGracePeriodSeconds -}}
{{- else -}}
{{- add (default 60 .leaseSeconds) 30 -}}
{{- end -}}
{{- end -}}

{{/* Topology spread: the configured constraints, else spread over nodes and zones. */}}
{{- define "boardreadyops.topologySpread" -}}
{{- if .values.topologySpreadConstraints -}}
{{ toYaml .values.topologySpreadConstraints }}
{{- else -}}
{{- range list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
- maxSkew: 1
  topologyKey: {{ . }}
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "boardreadyops.selectorLabels" $ | nindent 6 }}
{{- end }}
{{- end -}}
{{- end -}}

{{/*
A service Deployment. Call with a dict:
  root       the chart's top scope
  component  ingest | lifecycle | outbox-dispatcher | operator
  values     the component's values
  env        extra container env (YAML list text)
  ports      extra container ports (YAML list text)
  volumes, volumeMounts  (YAML list text)
  automount  mount a service account token (operator only)
  grace      terminationGracePeriodSeconds
*/}}
{{- define "boardreadyops.deployment" -}}
{{- $sel := dict "root" .root "component" .component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "boardreadyops.componentName" $sel }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "boardreadyops.labels" $sel | nindent 4 }}
spec:
  {{- if not (and .values.autoscaling .values.autoscaling.enabled) }}
  replicas: {{ .values.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "boardreadyops.selectorLabels" $sel | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        {{- include "boardreadyops.labels" $sel | nindent 8 }}
      {{- with .values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "boardreadyops.componentName" $sel }}
      automountServiceAccountToken: {{ .automount | default false }}
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ .grace }}
      securityContext:
        {{- include "boardreadyops.podSecurityContext" . | nindent 8 }}
      {{- with .root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if ne .component "operator" }}
      topologySpreadConstraints:
        {{- include "boardreadyops.topologySpread" (dict "root" .root "component" .component "values" .values) | trim | nindent 8 }}
      {{- end }}
      {{- with .values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "boardreadyops.image" (dict "root" .root "image" .component) }}
          imagePullPolicy: {{ .root.Values.image.pullPolicy }}
          securityContext:
            {{- include "boardreadyops.containerSecurityContext" . | nindent 12 }}
          ports:
            - name: metrics
              containerPort: 9090
              protocol: TCP
            {{- with .ports }}
            {{- . | nindent 12 }}
            {{- end }}
          env:
            {{- include "boardreadyops.commonEnv" .root | nindent 12 }}
            - name: BOARDREADYOPS_SHUTDOWN_TIMEOUT
              value: {{ printf "%ds" (sub (sub (int .grace) 5) (int (default 0 .preStopSleep))) | quote }}
            {{- include "boardreadyops.goMemLimitEnv" (dict "root" .root "resources" .values.resources) | nindent 12 }}
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with .values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- with .preStopSleep }}
          lifecycle:
            preStop:
              sleep:
                seconds: {{ . }}
          {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: metrics
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 6
          readinessProbe:
            httpGet:
              path: /readyz
              port: metrics
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 3
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          {{- with .volumeMounts }}
          volumeMounts:
            {{- . | nindent 12 }}
          {{- end }}
      {{- with .volumes }}
      volumes:
        {{- . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* PodDisruptionBudget of one component. */}}
{{- define "boardreadyops.pdb" -}}
{{- $sel := dict "root" .root "component" .component -}}
{{- if .values.podDisruptionBudget.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "boardreadyops.componentName" $sel }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "boardreadyops.labels" $sel | nindent 4 }}
spec:
  maxUnavailable: {{ .values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "boardreadyops.selectorLabels" $sel | nindent 6 }}
{{- end }}
{{- end -}}

{{/* HorizontalPodAutoscaler of one component. */}}
{{- define "boardreadyops.hpa" -}}
{{- $sel := dict "root" .root "component" .component -}}
{{- if .values.autoscaling.enabled }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "boardreadyops.componentName" $sel }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "boardreadyops.labels" $sel | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "boardreadyops.componentName" $sel }}
  minReplicas: {{ .values.autoscaling.minReplicas }}
  maxReplicas: {{ .values.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ .values.autoscaling.targetCPUUtilizationPercentage }}
{{- end }}
{{- end -}}

{{/* ServiceAccount of one component; no token is mounted unless automount. */}}
{{- define "boardreadyops.serviceAccount" -}}
{{- $sel := dict "root" .root "component" .component -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "boardreadyops.componentName" $sel }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "boardreadyops.labels" $sel | nindent 4 }}
automountServiceAccountToken: {{ .automount | default false }}
{{- end -}}

{{/* Metrics Service of one component (port "metrics", 9090). */}}
{{- define "boardreadyops.metricsService" -}}
{{- $sel := dict "root" .root "component" .component -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "boardreadyops.componentName" $sel }}-metrics
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "boardreadyops.labels" $sel | nindent 4 }}
    boardreadyops.io/metrics: "true"
spec:
  type: ClusterIP
  selector:
    {{- include "boardreadyops.selectorLabels" $sel | nindent 4 }}
  ports:
    - name: metrics
      port: 9090
      targetPort: metrics
      protocol: TCP
{{- end -}}

{{/* A memory quantity (Ki, Mi, Gi, K, M, G or plain bytes) in whole MiB. */}}
{{- define "boardreadyops.memoryMiB" -}}
{{- $q := toString . -}}
{{- $mib := 0 -}}
{{- if regexMatch "^[0-9]+Gi$" $q }}{{ $mib = mul (trimSuffix "Gi" $q | int64) 1024 }}
{{- else if regexMatch "^[0-9]+Mi$" $q }}{{ $mib = trimSuffix "Mi" $q | int64 }}
{{- else if regexMatch "^[0-9]+Ki$" $q }}{{ $mib = div (trimSuffix "Ki" $q | int64) 1024 }}
{{- else if regexMatch "^[0-9]+G$" $q }}{{ $mib = div (mul (trimSuffix "G" $q | int64) 1000000000) 1048576 }}
{{- else if regexMatch "^[0-9]+M$" $q }}{{ $mib = div (mul (trimSuffix "M" $q | int64) 1000000) 1048576 }}
{{- else if regexMatch "^[0-9]+$" $q }}{{ $mib = div ($q | int64) 1048576 }}
{{- end }}
{{- if le (int64 $mib) 0 }}{{ fail (printf "memory limit %q: write whole Ki, Mi, Gi, K, M or G (at least 1Mi)" $q) }}{{ end }}
{{- $mib -}}
{{- end -}}

{{/* The Go garbage collector's policy: GOGC (runtime.goGC), and GOMEMLIMIT from a container's
memory limit (runtime.goMemLimitPercent of it), so the collector works harder before the kernel
would kill the container. No GOMEMLIMIT without a limit (the binary's own default then applies).
Call with (dict "root" $ "resources" .Values.x.resources). */}}
{{- define "boardreadyops.goMemLimitEnv" -}}
{{- with .root.Values.runtime.goGC }}
- name: GOGC
  value: {{ . | toString | quote }}
{{- end }}
{{- with .resources }}{{ with .limits }}{{ with .memory }}
- name: GOMEMLIMIT
  value: {{ printf "%dMiB" (div (mul (include "boardreadyops.memoryMiB" . | int64) $.root.Values.runtime.goMemLimitPercent) 100) | quote }}
{{- end }}{{ end }}{{ end }}
{{- end -}}
