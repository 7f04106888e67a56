{{/*
seckill.validate fails the render on values that cannot run: a missing image, address or
secret, a secret in the ConfigMap, a variable the chart owns, a worker part in no group or
in two. configmap.yaml includes it, so no render gets past it.
*/}}
{{- define "seckill.validate" -}}
{{- $v := .Values -}}
{{- if or (not $v.image.repository) (not $v.image.tag) -}}
{{- fail "seckill: image.repository and image.tag are required (the production image: the Dockerfile's last stage)" -}}
{{- end -}}
{{- $secretKeys := splitList " " (include "seckill.secretKeys" .) -}}
{{- $chartKeys := splitList " " (include "seckill.chartKeys" .) -}}
{{- include "seckill.validateEnv" (dict "where" "config" "env" $v.config "secretKeys" $secretKeys "chartKeys" $chartKeys) -}}
{{- range $k := list "SECKILL_ROCKETMQ_NAMESRV" "SECKILL_TEMPORAL_ADDR" "SECKILL_PAYSIM_URL" "SECKILL_CALLBACK_URL" -}}
{{- if not (index $v.config $k) -}}
{{- fail (printf "seckill: config.%s is required (docs/deploy.md)" $k) -}}
{{- end -}}
{{- end -}}
{{- if not (or $v.config.SECKILL_REDIS_ADDR $v.config.SECKILL_REDIS_CLUSTER_ADDRS) -}}
{{- fail "seckill: config.SECKILL_REDIS_ADDR or config.SECKILL_REDIS_CLUSTER_ADDRS is required (docs/deploy.md)" -}}
{{- end -}}
{{- range $k := list "SECKILL_REDIS_ADDR" "SECKILL_REDIS_CLUSTER_ADDRS" "SECKILL_ROCKETMQ_NAMESRV" "SECKILL_TEMPORAL_ADDR" "SECKILL_PAYSIM_URL" "SECKILL_CALLBACK_URL" -}}
{{- $a := index $v.config $k | default "" | toString -}}
{{- if or (contains "127.0.0.1" $a) (contains "localhost" $a) -}}
{{- fail (printf "seckill: config.%s=%s points at the pod's own loopback: name the service" $k $a) -}}
{{- end -}}
{{- end -}}
{{- if not $v.secrets.existingSecret -}}
{{- range $k := $secretKeys -}}
{{- if not (index $v.secrets $k) -}}
{{- fail (printf "seckill: secrets.%s is required, or secrets.existingSecret naming a Secret that holds it (the chart ships no secret; generate keys with `openssl rand -hex 32`, docs/deploy.md#secrets)" $k) -}}
{{- end -}}
{{- end -}}
{{- if and (not $v.secrets.SECKILL_PG_DSN) (not $v.secrets.dsnSecretRef.name) -}}
{{- fail "seckill: secrets.SECKILL_PG_DSN or secrets.dsnSecretRef.name is required (or secrets.existingSecret; docs/deploy.md#secrets)" -}}
{{- end -}}
{{- end -}}
{{- if ne (toString $v.config.SECKILL_REDIS_TLS) "true" -}}
{{- fail "seckill: config.SECKILL_REDIS_TLS must be \"true\": production speaks TLS to Redis (docs/deploy.md#tls-and-credentials-to-redis-rocketmq-and-temporal)" -}}
{{- end -}}
{{- if not (or $v.temporal.tlsSecretName $v.temporal.apiKeySecretRef.name) -}}
{{- fail "seckill: temporal.apiKeySecretRef.name or temporal.tlsSecretName is required: production authenticates to Temporal (docs/deploy.md#tls-and-credentials-to-redis-rocketmq-and-temporal)" -}}
{{- end -}}
{{- if $v.temporal.tlsSecretName -}}
{{- range $k := list "SECKILL_TEMPORAL_TLS" "SECKILL_TEMPORAL_CA_FILE" "SECKILL_TEMPORAL_CERT_FILE" "SECKILL_TEMPORAL_KEY_FILE" -}}
{{- if index $v.config $k -}}
{{- fail (printf "seckill: config.%s is set by temporal.tlsSecretName (the mounted ca.crt, tls.crt, tls.key)" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $v.redis.caSecretName $v.config.SECKILL_REDIS_CA_FILE -}}
{{- fail "seckill: config.SECKILL_REDIS_CA_FILE is set by redis.caSecretName (the mounted ca.crt)" -}}
{{- end -}}
{{- if and $v.secrets.existingSecret (not $v.secrets.migrateDsnSecretRef.name) -}}
{{- fail "seckill: secrets.migrateDsnSecretRef.name is required with secrets.existingSecret: the migrations run as the schema's owner, the gateway and the workers as a role in seckill_app (docs/deploy.md#database-roles)" -}}
{{- end -}}
{{- if and (not $v.secrets.SECKILL_PG_MIGRATE_DSN) (not $v.secrets.migrateDsnSecretRef.name) -}}
{{- fail "seckill: secrets.SECKILL_PG_MIGRATE_DSN or secrets.migrateDsnSecretRef.name is required: the migrations run as the schema's owner, the gateway and the workers as a role in seckill_app (docs/deploy.md#database-roles)" -}}
{{- end -}}
{{- if and $v.secrets.SECKILL_PG_DSN (eq $v.secrets.SECKILL_PG_DSN $v.secrets.SECKILL_PG_MIGRATE_DSN) -}}
{{- fail "seckill: secrets.SECKILL_PG_MIGRATE_DSN equals secrets.SECKILL_PG_DSN: the gateway and the workers refuse the schema's owner in production (docs/deploy.md#database-roles)" -}}
{{- end -}}
{{- if and $v.secrets.dsnSecretRef.name (eq $v.secrets.dsnSecretRef.name $v.secrets.migrateDsnSecretRef.name) (eq $v.secrets.dsnSecretRef.key $v.secrets.migrateDsnSecretRef.key) -}}
{{- fail "seckill: secrets.migrateDsnSecretRef names the same key as secrets.dsnSecretRef: the gateway and the workers refuse the schema's owner in production (docs/deploy.md#database-roles)" -}}
{{- end -}}
{{- $all := splitList " " (include "seckill.allParts" .) -}}
{{- $seen := dict -}}
{{- range $name, $w := $v.workers -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$" $name) -}}
{{- fail (printf "seckill: workers.%s: a group name is lower-case letters, digits and '-' (at most 22)" $name) -}}
{{- end -}}
{{- if not $w.parts -}}
{{- fail (printf "seckill: workers.%s.parts is empty (want some of %s)" $name (join "," $all)) -}}
{{- end -}}
{{- range $p := $w.parts -}}
{{- if not (has $p $all) -}}
{{- fail (printf "seckill: workers.%s.parts: unknown part %q (want some of %s)" $name $p (join "," $all)) -}}
{{- end -}}
{{- if hasKey $seen $p -}}
{{- fail (printf "seckill: worker part %s is in both workers.%s and workers.%s" $p (get $seen $p) $name) -}}
{{- end -}}
{{- $_ := set $seen $p $name -}}
{{- end -}}
{{- include "seckill.validateEnv" (dict "where" (printf "workers.%s.env" $name) "env" ($w.env | default dict) "secretKeys" $secretKeys "chartKeys" $chartKeys) -}}
{{- end -}}
{{- range $p := $all -}}
{{- if not (hasKey $seen $p) -}}
{{- fail (printf "seckill: worker part %s runs in no group of workers (each part in exactly one)" $p) -}}
{{- end -}}
{{- end -}}
{{- include "seckill.validateEnv" (dict "where" "gateway.env" "env" ($v.gateway.env | default dict) "secretKeys" $secretKeys "chartKeys" $chartKeys) -}}
{{- end -}}

{{/* seckill.validateEnv: every key a SECKILL_ variable or one of the Go runtime's GC
settings (GOGC, GOMEMLIMIT: docs/operations.md#go-runtime-settings), no secret, none the
chart sets. */}}
{{- define "seckill.validateEnv" -}}
{{- range $k, $_ := .env -}}
{{- if not (or (hasPrefix "SECKILL_" $k) (has $k (list "GOGC" "GOMEMLIMIT"))) -}}
{{- fail (printf "seckill: %s.%s is not a SECKILL_ variable (nor GOGC, GOMEMLIMIT)" $.where $k) -}}
{{- end -}}
{{- if or (has $k $.secretKeys) (eq $k "SECKILL_PG_DSN") -}}
{{- fail (printf "seckill: %s.%s is a secret: set it under secrets" $.where $k) -}}
{{- end -}}
{{- if has $k $.chartKeys -}}
{{- fail (printf "seckill: %s.%s is set by the chart (production, listeners on 0.0.0.0)" $.where $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
