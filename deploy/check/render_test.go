// Package check holds the checks of the deployment files that need libraries
// the production module must not link: the Helm chart (deploy/helm/seckill),
// rendered by Helm's own code and decoded strictly into the Kubernetes API
// types, and docker-compose.yml, loaded by the Compose specification's own
// loader. `make lint` runs them (docs/deploy.md).
package check

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../helm/seckill"

// kubeVersion is the cluster version the chart is rendered for.
const kubeVersion = "v1.33.0"

// TestMain silences Helm's log (it notes files/alerts.yml, a link, at every load).
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// object is one rendered manifest, decoded into its API type.
type object struct {
	Kind, Name string
	Hook       bool
	Obj        any
}

// newObject returns an empty value of the API type of apiVersion/kind.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/Secret":
		return &corev1.Secret{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "batch/v1/Job":
		return &batchv1.Job{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, nil
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &monitoringv1.PrometheusRule{}, nil
	}
	return nil, fmt.Errorf("no API type known for %s %s", apiVersion, kind)
}

// decodeStrict decodes one YAML document into its API type: an unknown or
// repeated field is an error, as is a kind this check does not know.
func decodeStrict(doc string) (object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		return object{}, err
	}
	obj, err := newObject(tm.APIVersion, tm.Kind)
	if err != nil {
		return object{}, err
	}
	if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
		return object{}, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	meta := obj.(metav1.ObjectMetaAccessor).GetObjectMeta()
	_, hook := meta.GetAnnotations()["helm.sh/hook"]
	return object{Kind: tm.Kind, Name: meta.GetName(), Hook: hook, Obj: obj}, nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// render renders the chart as `helm template` does (hooks included) with
// the values of file, changed by edit, and decodes every object strictly.
func render(t *testing.T, file string, edit func(v map[string]any)) ([]object, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if file != "" {
		if vals, err = common.ReadValuesFile(file); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(vals)
	}
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName, inst.Namespace, inst.Replace = "sk", "shop", true
	// Helm's default outside its own binary is v1.20, below the chart's kubeVersion.
	if inst.KubeVersion, err = common.ParseKubeVersion(kubeVersion); err != nil {
		t.Fatal(err)
	}
	r, err := inst.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	rel := r.(*release.Release)
	docs := docSep.Split(rel.Manifest, -1)
	for _, h := range rel.Hooks {
		docs = append(docs, docSep.Split(h.Manifest, -1)...)
	}
	var out []object
	for _, d := range docs {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(d, "")) == "" {
			continue
		}
		o, err := decodeStrict(d)
		if err != nil {
			t.Fatalf("rendered object does not decode strictly: %v\n%s", err, d)
		}
		out = append(out, o)
	}
	return out, nil
}

// mustRender renders and fails the test on a render error.
func mustRender(t *testing.T, file string, edit func(v map[string]any)) []object {
	t.Helper()
	objs, err := render(t, file, edit)
	if err != nil {
		t.Fatalf("render with %s: %v", file, err)
	}
	return objs
}

// byKind returns the objects of kind, by name.
func byKind[T any](objs []object, kind string) map[string]*T {
	out := map[string]*T{}
	for _, o := range objs {
		if o.Kind == kind {
			out[o.Name] = o.Obj.(*T)
		}
	}
	return out
}

// TestDecodeStrictRefusesUnknownFields: the strict decoding this check relies
// on fails on a misspelt field, in a core type and in a CRD type.
func TestDecodeStrictRefusesUnknownFields(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec: {endpoint: []}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {A: b}\ndata: {A: c}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
	} {
		if _, err := decodeStrict(doc); err == nil {
			t.Errorf("decoded without error:\n%s", doc)
		}
	}
	if _, err := decodeStrict("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: 2}\n"); err != nil {
		t.Errorf("a valid Deployment: %v", err)
	}
}
