{{/* Names, labels and the shared pieces of the pod specs. */}}

{{- define "seckill.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "seckill.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "seckill.labels" -}}
{{ include "seckill.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The parts of `seckill worker` (app.AllParts; deploy/helm_test.go compares them). */}}
{{- define "seckill.allParts" -}}
senddue rebalance starter saga outbox deadletter refunds
{{- end -}}

{{/* The secrets (config fields tagged secret:"dev", and the DSN, which holds the password). */}}
{{- define "seckill.secretKeys" -}}
SECKILL_ID_SECRETS SECKILL_AUTH_SECRETS SECKILL_ADMIN_TOKEN SECKILL_PAYSIM_SECRET SECKILL_PAYSIM_MERCHANT_KEY SECKILL_PAYLOAD_SECRETS SECKILL_REDIS_PASSWORD SECKILL_ROCKETMQ_SECRET_KEY
{{- end -}}

{{/* Variables the chart sets itself. */}}
{{- define "seckill.chartKeys" -}}
SECKILL_ENV SECKILL_HTTP_ADDR SECKILL_METRICS_ADDR
{{- end -}}

{{- define "seckill.image" -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- end -}}

{{- define "seckill.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "seckill.fullname" .) -}}
{{- end -}}

{{/* The ConfigMap's data: the non-empty config values and the chart's own. */}}
{{- define "seckill.configData" -}}
SECKILL_ENV: production
SECKILL_HTTP_ADDR: "0.0.0.0:8080"
SECKILL_METRICS_ADDR: {{ printf "0.0.0.0:%d" (int .Values.metrics.port) | quote }}
{{- if .Values.temporal.tlsSecretName }}
SECKILL_TEMPORAL_TLS: "true"
SECKILL_TEMPORAL_CA_FILE: /etc/seckill/temporal-tls/ca.crt
SECKILL_TEMPORAL_CERT_FILE: /etc/seckill/temporal-tls/tls.crt
SECKILL_TEMPORAL_KEY_FILE: /etc/seckill/temporal-tls/tls.key
{{- end }}
{{- if .Values.redis.caSecretName }}
SECKILL_REDIS_CA_FILE: /etc/seckill/redis-ca/ca.crt
{{- end }}
{{- with .Values.postgres }}{{ if .sslmode }}
PGSSLMODE: {{ .sslmode | quote }}
{{- end }}{{ end }}
{{- range $k, $v := .Values.config }}
{{- if ne (toString $v) "" }}
{{ $k }}: {{ toString $v | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The Secret's data (only without existingSecret). */}}
{{- define "seckill.secretData" -}}
{{- $s := .Values.secrets -}}
{{- range $k := splitList " " (include "seckill.secretKeys" .) }}
{{ $k }}: {{ index $s $k | toString | b64enc | quote }}
{{- end }}
{{- if not $s.dsnSecretRef.name }}
SECKILL_PG_DSN: {{ $s.SECKILL_PG_DSN | toString | b64enc | quote }}
{{- end }}
{{- end -}}

{{/* The migrations Job's Secret: the same secrets, SECKILL_PG_DSN the owner's (unless migrateDsnSecretRef names it). */}}
{{- define "seckill.migrateSecretData" -}}
{{- $s := .Values.secrets -}}
{{- range $k := splitList " " (include "seckill.secretKeys" .) }}
{{ $k }}: {{ index $s $k | toString | b64enc | quote }}
{{- end }}
{{- if not $s.migrateDsnSecretRef.name }}
SECKILL_PG_DSN: {{ $s.SECKILL_PG_MIGRATE_DSN | toString | b64enc | quote }}
{{- end }}
{{- end -}}

{{/* envFrom, env and volumeMounts of every seckill container; cm is the ConfigMap's name, dsnRef (optional) the secretKeyRef of SECKILL_PG_DSN instead of secrets.dsnSecretRef. */}}
{{- define "seckill.env" -}}
envFrom:
  - configMapRef:
      name: {{ .cm }}
  - secretRef:
      name: {{ .secret }}
{{- $ref := .root.Values.secrets.dsnSecretRef }}
{{- if hasKey . "dsnRef" }}{{ $ref = .dsnRef }}{{ end }}
{{- $key := .root.Values.temporal.apiKeySecretRef }}
{{- if or $ref.name .extra $key.name }}
env:
{{- if $ref.name }}
  - name: SECKILL_PG_DSN
    valueFrom:
      secretKeyRef:
        name: {{ $ref.name }}
        key: {{ $ref.key }}
{{- end }}
{{- if $key.name }}
  - name: SECKILL_TEMPORAL_API_KEY
    valueFrom:
      secretKeyRef:
        name: {{ $key.name }}
        key: {{ $key.key }}
{{- end }}
{{- range $k, $v := .extra }}
  - name: {{ $k }}
    value: {{ toString $v | quote }}
{{- end }}
{{- end }}
{{- if or .root.Values.temporal.tlsSecretName .root.Values.redis.caSecretName }}
volumeMounts:
{{- if .root.Values.temporal.tlsSecretName }}
  - name: temporal-tls
    mountPath: /etc/seckill/temporal-tls
    readOnly: true
{{- end }}
{{- if .root.Values.redis.caSecretName }}
  - name: redis-ca
    mountPath: /etc/seckill/redis-ca
    readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{/* The pod-level settings shared by every pod. */}}
{{- define "seckill.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- if or .Values.temporal.tlsSecretName .Values.redis.caSecretName }}
volumes:
{{- with .Values.temporal.tlsSecretName }}
  - name: temporal-tls
    secret:
      secretName: {{ . }}
{{- end }}
{{- with .Values.redis.caSecretName }}
  - name: redis-ca
    secret:
      secretName: {{ . }}
{{- end }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Annotations that roll the pods when the configuration or the secrets change. */}}
{{- define "seckill.podAnnotations" -}}
checksum/config: {{ include "seckill.configData" . | sha256sum }}
checksum/secret: {{ toJson .Values.secrets | sha256sum }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}
