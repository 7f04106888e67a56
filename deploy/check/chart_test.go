package check

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/seckill/seckill/internal/platform/config"
)

// The value files `make lint` renders the chart with.
const (
	minimalValues    = "testdata/minimal.yaml"
	productionValues = "testdata/production.yaml"
	image            = "registry.example.com/seckill:0.1.0"
)

// configVars returns every variable config.Config reads, and the secrets
// among them (fields tagged secret:"dev").
func configVars() (known map[string]bool, secrets []string) {
	known = map[string]bool{}
	typ := reflect.TypeOf(config.Config{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		if name := f.Tag.Get("env"); name != "" {
			known[name] = true
			if f.Tag.Get("secret") != "" {
				secrets = append(secrets, name)
			}
		}
	}
	// The PostgreSQL driver reads the libpq variables too (pgconn.ParseConfig),
	// and the Go runtime its GC settings.
	known["PGSSLMODE"], known["GOGC"], known["GOMEMLIMIT"] = true, true, true
	return known, secrets
}

// TestChartRendersEveryObjectStrictly renders both value files and checks
// what each object must be; every object decoded strictly on the way.
func TestChartRendersEveryObjectStrictly(t *testing.T) {
	for _, c := range []struct {
		file    string
		workers []string
		kinds   map[string]int
	}{
		{minimalValues, []string{"intake", "loops", "saga"}, map[string]int{"ConfigMap": 2, "Secret": 2, "Service": 2,
			"Deployment": 4, "Job": 1, "PodDisruptionBudget": 4, "HorizontalPodAutoscaler": 1}},
		{productionValues, []string{"intake", "loops", "relays", "saga"}, map[string]int{"ConfigMap": 2, "Service": 2,
			"Deployment": 5, "Job": 1, "PodDisruptionBudget": 5, "HorizontalPodAutoscaler": 1, "ServiceMonitor": 1, "PrometheusRule": 1}},
	} {
		t.Run(c.file, func(t *testing.T) {
			objs := mustRender(t, c.file, nil)
			got := map[string]int{}
			for _, o := range objs {
				got[o.Kind]++
			}
			if !maps.Equal(got, c.kinds) {
				t.Errorf("kinds rendered %v, want %v", got, c.kinds)
			}
			deps := byKind[appsv1.Deployment](objs, "Deployment")
			want := []string{"sk-seckill-gateway"}
			for _, w := range c.workers {
				want = append(want, "sk-seckill-worker-"+w)
			}
			if names := slices.Sorted(maps.Keys(deps)); !slices.Equal(names, want) {
				t.Errorf("Deployments %v, want %v", names, want)
			}
			checkPods(t, objs)
			checkWorkerParts(t, deps)
			checkConfig(t, objs)
			checkMigrations(t, objs)
			checkSelectors(t, objs)
		})
	}
}

// podSpecs returns the pod template of every Deployment and Job.
func podSpecs(objs []object) map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for n, d := range byKind[appsv1.Deployment](objs, "Deployment") {
		out[n] = d.Spec.Template
	}
	for n, j := range byKind[batchv1.Job](objs, "Job") {
		out[n] = j.Spec.Template
	}
	return out
}

// checkPods: the production image only, the command of each process, the
// probes on the real health endpoints, the metrics port, no root.
func checkPods(t *testing.T, objs []object) {
	t.Helper()
	for name, p := range podSpecs(objs) {
		if len(p.Spec.Containers) != 1 || len(p.Spec.InitContainers) != 0 {
			t.Errorf("%s: %d containers and %d init containers, want the one seckill container", name,
				len(p.Spec.Containers), len(p.Spec.InitContainers))
			continue
		}
		c := p.Spec.Containers[0]
		if c.Image != image {
			t.Errorf("%s: image %q, want the production image %s", name, c.Image, image)
		}
		if p.Spec.SecurityContext == nil || p.Spec.SecurityContext.RunAsNonRoot == nil || !*p.Spec.SecurityContext.RunAsNonRoot {
			t.Errorf("%s: pod may run as root", name)
		}
		var probePort, probeName string
		switch {
		case strings.HasSuffix(name, "-gateway"):
			probePort, probeName = "http", "api"
		case strings.Contains(name, "-worker-"):
			probePort, probeName = "metrics", "worker"
		case strings.HasSuffix(name, "-migrate"):
			if !slices.Equal(c.Args, []string{"migrate", "up"}) {
				t.Errorf("%s: args %v, want migrate up", name, c.Args)
			}
			continue
		default:
			t.Errorf("%s: a pod of no known process", name)
			continue
		}
		if len(c.Args) == 0 || c.Args[0] != probeName {
			t.Errorf("%s: args %v, want %s ...", name, c.Args, probeName)
		}
		for what, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/healthz" || pr.HTTPGet.Port.String() != probePort {
				t.Errorf("%s: %s probe %+v, want GET /healthz on port %s", name, what, pr, probePort)
			}
		}
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 9464 }) {
			t.Errorf("%s: no container port metrics 9464: %+v", name, c.Ports)
		}
	}
}

// checkWorkerParts: every part of `seckill worker` runs in exactly one
// Deployment (the parts as the chart lists them; deploy/helm_test.go in the
// main module holds that list to app.AllParts).
func checkWorkerParts(t *testing.T, deps map[string]*appsv1.Deployment) {
	t.Helper()
	seen := map[string]string{}
	for name, d := range deps {
		args := d.Spec.Template.Spec.Containers[0].Args
		if args[0] != "worker" {
			continue
		}
		if len(args) != 3 || args[1] != "--only" {
			t.Errorf("%s: args %v, want worker --only <parts>", name, args)
			continue
		}
		for _, p := range strings.Split(args[2], ",") {
			if other, ok := seen[p]; ok {
				t.Errorf("part %s runs in %s and %s", p, other, name)
			}
			seen[p] = name
		}
	}
	want := []string{"deadletter", "outbox", "rebalance", "refunds", "saga", "senddue", "starter"}
	if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, want) {
		t.Errorf("worker parts deployed %v, want %v", got, want)
	}
}

// checkConfig: the ConfigMaps hold only variables the code reads, never a
// secret, and SECKILL_ENV=production; the Secrets hold every secret.
func checkConfig(t *testing.T, objs []object) {
	t.Helper()
	known, secrets := configVars()
	for name, cm := range byKind[corev1.ConfigMap](objs, "ConfigMap") {
		for k := range cm.Data {
			if !known[k] {
				t.Errorf("ConfigMap %s sets %s, which the code does not read", name, k)
			}
			if slices.Contains(secrets, k) || k == "SECKILL_PG_DSN" {
				t.Errorf("ConfigMap %s holds the secret %s", name, k)
			}
		}
		if cm.Data["PGSSLMODE"] != "require" {
			t.Errorf("ConfigMap %s: PGSSLMODE=%q, want require (a DSN without sslmode is refused in production)", name, cm.Data["PGSSLMODE"])
		}
		if cm.Data["SECKILL_ENV"] != "production" || cm.Data["SECKILL_METRICS_ADDR"] != "0.0.0.0:9464" {
			t.Errorf("ConfigMap %s: SECKILL_ENV=%q SECKILL_METRICS_ADDR=%q", name, cm.Data["SECKILL_ENV"], cm.Data["SECKILL_METRICS_ADDR"])
		}
	}
	for name, s := range byKind[corev1.Secret](objs, "Secret") {
		for _, k := range append(secrets, "SECKILL_PG_DSN") {
			if len(s.Data[k]) == 0 {
				t.Errorf("Secret %s lacks %s", name, k)
			}
		}
		for k := range s.Data {
			if !known[k] {
				t.Errorf("Secret %s sets %s, which the code does not read", name, k)
			}
		}
	}
	for name, p := range podSpecs(objs) {
		for _, e := range p.Spec.Containers[0].Env {
			if !known[e.Name] {
				t.Errorf("%s: env %s, which the code does not read", name, e.Name)
			}
		}
	}
}

// checkMigrations: the Job is a pre-install/pre-upgrade hook whose ConfigMap
// and Secret are hooks that come before it (nothing else of the release exists
// on an install), and no Deployment is a hook.
func checkMigrations(t *testing.T, objs []object) {
	t.Helper()
	weight := map[string]string{}
	for _, o := range objs {
		if o.Hook {
			a := o.Obj.(interface{ GetAnnotations() map[string]string }).GetAnnotations()
			if a["helm.sh/hook"] != "pre-install,pre-upgrade" {
				t.Errorf("%s %s: hook %q", o.Kind, o.Name, a["helm.sh/hook"])
			}
			weight[o.Kind+"/"+o.Name] = a["helm.sh/hook-weight"]
		} else if o.Kind == "Job" {
			t.Errorf("Job %s is not a hook", o.Name)
		}
	}
	job := byKind[batchv1.Job](objs, "Job")["sk-seckill-migrate"]
	if job == nil || weight["Job/sk-seckill-migrate"] != "0" {
		t.Fatalf("no migration Job hook of weight 0: %v", weight)
	}
	for _, ef := range job.Spec.Template.Spec.Containers[0].EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			if weight["ConfigMap/"+ef.ConfigMapRef.Name] != "-1" {
				t.Errorf("the Job reads ConfigMap %s, not a hook before it (%v)", ef.ConfigMapRef.Name, weight)
			}
		case ef.SecretRef != nil:
			if _, chartMade := byKind[corev1.Secret](objs, "Secret")[ef.SecretRef.Name]; chartMade && weight["Secret/"+ef.SecretRef.Name] != "-1" {
				t.Errorf("the Job reads the chart's Secret %s, not a hook before it (%v)", ef.SecretRef.Name, weight)
			}
		}
	}
}

// checkSelectors: each PodDisruptionBudget selects exactly one Deployment's
// pods, the HPA scales the gateway, the ServiceMonitor selects the metrics
// Service by a port it has.
func checkSelectors(t *testing.T, objs []object) {
	t.Helper()
	deps := byKind[appsv1.Deployment](objs, "Deployment")
	for name, pdb := range byKind[policyv1.PodDisruptionBudget](objs, "PodDisruptionBudget") {
		sel := labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels)
		var hits []string
		for dn, d := range deps {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				hits = append(hits, dn)
			}
		}
		if len(hits) != 1 || hits[0] != name {
			t.Errorf("PodDisruptionBudget %s selects %v, want its own Deployment", name, hits)
		}
	}
	for name, h := range byKind[autoscalingv2.HorizontalPodAutoscaler](objs, "HorizontalPodAutoscaler") {
		if d := deps[h.Spec.ScaleTargetRef.Name]; d == nil || h.Spec.ScaleTargetRef.Name != "sk-seckill-gateway" || d.Spec.Replicas != nil {
			t.Errorf("HPA %s scales %q; want the gateway, whose Deployment then sets no replicas", name, h.Spec.ScaleTargetRef.Name)
		}
	}
	svcs := byKind[corev1.Service](objs, "Service")
	for name, sm := range byKind[monitoringv1.ServiceMonitor](objs, "ServiceMonitor") {
		sel := labels.SelectorFromSet(sm.Spec.Selector.MatchLabels)
		var hits []*corev1.Service
		for _, s := range svcs {
			if sel.Matches(labels.Set(s.Labels)) {
				hits = append(hits, s)
			}
		}
		if len(hits) != 1 || hits[0].Name != "sk-seckill-metrics" || len(sm.Spec.Endpoints) != 1 ||
			hits[0].Spec.Ports[0].Name != sm.Spec.Endpoints[0].Port {
			t.Errorf("ServiceMonitor %s does not select the metrics Service by its port", name)
		}
	}
}

// TestPrometheusRuleIsAlertsYml: the chart's PrometheusRule carries the
// groups of deploy/prometheus/alerts.yml unchanged.
func TestPrometheusRuleIsAlertsYml(t *testing.T) {
	raw, err := os.ReadFile("../prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatalf("alerts.yml does not decode strictly as the operator's rule groups: %v", err)
	}
	rules := byKind[monitoringv1.PrometheusRule](mustRender(t, productionValues, nil), "PrometheusRule")
	got := rules["sk-seckill"]
	if got == nil || len(want.Groups) < 5 || !reflect.DeepEqual(got.Spec, want) {
		t.Fatalf("PrometheusRule sk-seckill differs from alerts.yml (%d groups there)", len(want.Groups))
	}
}
