package check

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// sub returns the map under key of v (nil when absent).
func sub(v map[string]any, key string) map[string]any {
	m, _ := v[key].(map[string]any)
	return m
}

// TestChartRefusesToRenderWithout: the chart fails with a message naming the
// value at fault, for every secret and address it needs and every mistake it
// catches.
func TestChartRefusesToRenderWithout(t *testing.T) {
	cases := []struct {
		name string
		edit func(v map[string]any)
		want string
	}{
		{"no image", func(v map[string]any) { delete(sub(v, "image"), "tag") }, "image.repository and image.tag are required"},
		{"no Redis", func(v map[string]any) { delete(sub(v, "config"), "SECKILL_REDIS_ADDR") }, "config.SECKILL_REDIS_ADDR or config.SECKILL_REDIS_CLUSTER_ADDRS is required"},
		{"loopback", func(v map[string]any) { sub(v, "config")["SECKILL_TEMPORAL_ADDR"] = "127.0.0.1:7233" }, "config.SECKILL_TEMPORAL_ADDR=127.0.0.1:7233 points at the pod's own loopback"},
		{"no DSN", func(v map[string]any) { delete(sub(v, "secrets"), "SECKILL_PG_DSN") }, "secrets.SECKILL_PG_DSN or secrets.dsnSecretRef.name is required"},
		{"Redis in plain text", func(v map[string]any) { sub(v, "config")["SECKILL_REDIS_TLS"] = "false" }, "config.SECKILL_REDIS_TLS must be"},
		{"no Temporal credential", func(v map[string]any) { delete(v, "temporal") }, "temporal.apiKeySecretRef.name or temporal.tlsSecretName is required"},
		{"Temporal files beside the mounted ones", func(v map[string]any) {
			v["temporal"] = map[string]any{"tlsSecretName": "client-cert"}
			sub(v, "config")["SECKILL_TEMPORAL_CERT_FILE"] = "/x.crt"
		}, "config.SECKILL_TEMPORAL_CERT_FILE is set by temporal.tlsSecretName"},
		{"Redis CA twice", func(v map[string]any) {
			v["redis"] = map[string]any{"caSecretName": "redis-ca"}
			sub(v, "config")["SECKILL_REDIS_CA_FILE"] = "/x/ca.crt"
		}, "config.SECKILL_REDIS_CA_FILE is set by redis.caSecretName"},
		{"no migrations DSN", func(v map[string]any) { delete(sub(v, "secrets"), "SECKILL_PG_MIGRATE_DSN") }, "secrets.SECKILL_PG_MIGRATE_DSN or secrets.migrateDsnSecretRef.name is required"},
		{"migrations DSN is the app's", func(v map[string]any) {
			sub(v, "secrets")["SECKILL_PG_MIGRATE_DSN"] = sub(v, "secrets")["SECKILL_PG_DSN"]
		}, "secrets.SECKILL_PG_MIGRATE_DSN equals secrets.SECKILL_PG_DSN"},
		{"existing secret without the migrations DSN", func(v map[string]any) {
			sub(v, "secrets")["existingSecret"] = "mine"
			delete(sub(v, "secrets"), "SECKILL_PG_MIGRATE_DSN")
		}, "secrets.migrateDsnSecretRef.name is required with secrets.existingSecret"},
		{"secret in config", func(v map[string]any) { sub(v, "config")["SECKILL_ADMIN_TOKEN"] = "x" }, "config.SECKILL_ADMIN_TOKEN is a secret: set it under secrets"},
		{"env in config", func(v map[string]any) { sub(v, "config")["SECKILL_ENV"] = "development" }, "config.SECKILL_ENV is set by the chart"},
		{"not a SECKILL_ variable", func(v map[string]any) { sub(v, "config")["PG_DSN"] = "x" }, "config.PG_DSN is not a SECKILL_ variable (nor GOGC, GOMEMLIMIT)"},
		{"unknown part", func(v map[string]any) {
			v["workers"] = map[string]any{"saga": map[string]any{"parts": []any{"saga", "sagas"}}}
		}, `workers.saga.parts: unknown part "sagas"`},
		{"part twice", func(v map[string]any) {
			v["workers"] = map[string]any{"extra": map[string]any{"parts": []any{"outbox"}, "replicas": 1}}
		}, "worker part outbox is in both workers."},
		{"part in no group", func(v map[string]any) { v["workers"] = map[string]any{"saga": nil} }, "worker part saga runs in no group of workers"},
	}
	for _, k := range []string{"SECKILL_ID_SECRETS", "SECKILL_AUTH_SECRETS", "SECKILL_ADMIN_TOKEN", "SECKILL_PAYSIM_SECRET", "SECKILL_PAYSIM_MERCHANT_KEY", "SECKILL_PAYLOAD_SECRETS", "SECKILL_REDIS_PASSWORD", "SECKILL_ROCKETMQ_SECRET_KEY"} {
		cases = append(cases, struct {
			name string
			edit func(v map[string]any)
			want string
		}{"no " + k, func(v map[string]any) { delete(sub(v, "secrets"), k) }, "secrets." + k + " is required, or secrets.existingSecret"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, minimalValues, c.edit)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("render: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestChartShipsNoSecret: with the chart's own values alone (plus the image
// and the addresses) it refuses to render, and a render with the secrets
// of a Secret made apart creates none of its own.
func TestChartShipsNoSecret(t *testing.T) {
	_, err := render(t, minimalValues, func(v map[string]any) { delete(v, "secrets") })
	if err == nil || !strings.Contains(err.Error(), "secrets.SECKILL_ID_SECRETS is required") {
		t.Fatalf("render without secrets: %v, want the refusal naming secrets.SECKILL_ID_SECRETS", err)
	}
	objs := mustRender(t, minimalValues, func(v map[string]any) {
		v["secrets"] = map[string]any{"existingSecret": "made-apart", "migrateDsnSecretRef": map[string]any{"name": "pg-owner", "key": "uri"}}
	})
	if s := byKind[corev1.Secret](objs, "Secret"); len(s) != 0 {
		t.Errorf("with existingSecret the chart still renders Secrets %v", s)
	}
	for name, p := range podSpecs(objs) {
		ef := p.Spec.Containers[0].EnvFrom
		if len(ef) != 2 || ef[1].SecretRef == nil || ef[1].SecretRef.Name != "made-apart" {
			t.Errorf("%s: envFrom %+v, want the Secret made-apart", name, ef)
		}
	}
}

// TestMigrationsRunAsTheOwnerAndTheRestAsTheAppRole: the migrations Job gets
// the owner's DSN, every other pod the application role's, from values and
// from Secret references alike.
func TestMigrationsRunAsTheOwnerAndTheRestAsTheAppRole(t *testing.T) {
	objs := mustRender(t, minimalValues, nil)
	for name, sec := range byKind[corev1.Secret](objs, "Secret") {
		want := "seckill_api:"
		if strings.HasSuffix(name, "-migrate") {
			want = "seckill:test-owner-password"
		}
		if got := string(sec.Data["SECKILL_PG_DSN"]); !strings.Contains(got, want) {
			t.Errorf("Secret %s: SECKILL_PG_DSN %q, want the one with %s", name, got, want)
		}
	}
	objs = mustRender(t, minimalValues, func(v map[string]any) {
		v["secrets"] = map[string]any{"existingSecret": "made-apart",
			"dsnSecretRef":        map[string]any{"name": "pg-api", "key": "dsn"},
			"migrateDsnSecretRef": map[string]any{"name": "pg-owner", "key": "uri"}}
	})
	pods := podSpecs(objs)
	if len(pods) < 3 {
		t.Fatalf("%d pods rendered", len(pods))
	}
	for name, p := range pods {
		want := "pg-api"
		if strings.Contains(name, "migrate") {
			want = "pg-owner"
		}
		var got string
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "SECKILL_PG_DSN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				got = e.ValueFrom.SecretKeyRef.Name
			}
		}
		if got != want {
			t.Errorf("%s: SECKILL_PG_DSN from Secret %q, want %q", name, got, want)
		}
	}
}

// TestTemporalCredentialsReachEveryPod: the API key comes from its Secret's
// key into every pod; a client certificate's Secret is mounted in every pod
// and the ConfigMaps point the file variables at it.
func TestTemporalCredentialsReachEveryPod(t *testing.T) {
	for name, p := range podSpecs(mustRender(t, minimalValues, nil)) {
		var got string
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "SECKILL_TEMPORAL_API_KEY" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				got = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		if got != "temporal-api-key/api-key" {
			t.Errorf("%s: SECKILL_TEMPORAL_API_KEY from %q, want temporal-api-key/api-key", name, got)
		}
	}
	objs := mustRender(t, minimalValues, func(v map[string]any) { v["temporal"] = map[string]any{"tlsSecretName": "client-cert"} })
	for name, p := range podSpecs(objs) {
		vols, mounts := p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts
		if len(vols) != 1 || vols[0].Secret == nil || vols[0].Secret.SecretName != "client-cert" ||
			len(mounts) != 1 || mounts[0].Name != vols[0].Name || mounts[0].MountPath != "/etc/seckill/temporal-tls" {
			t.Errorf("%s: volumes %+v, mounts %+v; want client-cert at /etc/seckill/temporal-tls", name, vols, mounts)
		}
	}
	for name, cm := range byKind[corev1.ConfigMap](objs, "ConfigMap") {
		if cm.Data["SECKILL_TEMPORAL_TLS"] != "true" || cm.Data["SECKILL_TEMPORAL_CERT_FILE"] != "/etc/seckill/temporal-tls/tls.crt" ||
			cm.Data["SECKILL_TEMPORAL_KEY_FILE"] != "/etc/seckill/temporal-tls/tls.key" || cm.Data["SECKILL_REDIS_TLS"] != "true" {
			t.Errorf("ConfigMap %s: %v", name, cm.Data)
		}
	}
}

// redis.caSecretName mounts the Redis CA in every pod, beside the Temporal
// client certificate, and points SECKILL_REDIS_CA_FILE at it.
func TestTheRedisCAIsMountedAndNamed(t *testing.T) {
	objs := mustRender(t, minimalValues, func(v map[string]any) {
		v["redis"] = map[string]any{"caSecretName": "redis-ca-cert"}
		v["temporal"] = map[string]any{"tlsSecretName": "client-cert"}
	})
	for name, p := range podSpecs(objs) {
		vols, mounts := p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts
		got := map[string]string{}
		for _, vol := range vols {
			if vol.Secret != nil {
				got[vol.Name] = vol.Secret.SecretName
			}
		}
		at := map[string]string{}
		for _, m := range mounts {
			at[m.Name] = m.MountPath
		}
		if got["redis-ca"] != "redis-ca-cert" || got["temporal-tls"] != "client-cert" ||
			at["redis-ca"] != "/etc/seckill/redis-ca" || at["temporal-tls"] != "/etc/seckill/temporal-tls" {
			t.Errorf("%s: volumes %v, mounts %v", name, got, at)
		}
	}
	for name, cm := range byKind[corev1.ConfigMap](objs, "ConfigMap") {
		if cm.Data["SECKILL_REDIS_CA_FILE"] != "/etc/seckill/redis-ca/ca.crt" {
			t.Errorf("ConfigMap %s: SECKILL_REDIS_CA_FILE = %q", name, cm.Data["SECKILL_REDIS_CA_FILE"])
		}
	}
}
