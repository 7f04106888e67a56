package deploy_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/seckill/seckill/app"
	"github.com/seckill/seckill/internal/platform/config"
)

// The Helm chart lists the worker parts and the secrets in its templates
// (deploy/helm/seckill/templates/_helpers.tpl); these tests hold the lists to
// the code's. deploy/check renders the chart itself (make lint).

func chartList(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile("helm/seckill/templates/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\{\{- define "` + regexp.QuoteMeta(name) + `" -\}\}\n(.*?)\n\{\{- end -\}\}`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("_helpers.tpl defines no %s", name)
	}
	return strings.Fields(string(m[1]))
}

func TestChartKnowsEveryWorkerPart(t *testing.T) {
	if got := chartList(t, "seckill.allParts"); !slices.Equal(got, app.AllParts) {
		t.Errorf("the chart's worker parts %v, app.AllParts %v", got, app.AllParts)
	}
	raw, err := os.ReadFile("helm/seckill/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Workers map[string]struct {
			Parts []string `yaml:"parts"`
		} `yaml:"workers"`
	}
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var deployed []string
	for _, w := range v.Workers {
		deployed = append(deployed, w.Parts...)
	}
	slices.Sort(deployed)
	want := slices.Sorted(slices.Values(app.AllParts))
	if !slices.Equal(deployed, want) {
		t.Errorf("the chart's default worker groups run %v, want each of %v once", deployed, want)
	}
}

func TestChartKnowsEverySecret(t *testing.T) {
	var want []string
	typ := reflect.TypeOf(config.Config{})
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Tag.Get("secret") != "" {
			want = append(want, f.Tag.Get("env"))
		}
	}
	if got := chartList(t, "seckill.secretKeys"); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("the chart's secrets %v, the config's %v", got, want)
	}
}
