package jsonx_test

import (
	"testing"

	"github.com/seckill/seckill/internal/platform/jsonx"
)

func TestWholeNumberLiterals(t *testing.T) {
	for in, want := range map[string]string{"7.0": "7", "1e3": "1000", "-2.50e1": "-25", "348326379527299.0": "348326379527299",
		"1.5": "", "7": "", "1e999999999": "", "1e-999999999": "", "0.0": "0", "12E+1": "120", "1e21": ""} {
		got, ok := jsonx.WholeNumber(in)
		if ok != (want != "") || got != want {
			t.Errorf("wholeNumber(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestStrictTakesWholeNumbersAsIntegers(t *testing.T) {
	var v struct {
		SKUs []struct {
			SKUID int64 `json:"sku_id"`
		} `json:"skus"`
		Name string `json:"name"`
	}
	if err := jsonx.Strict([]byte(`{"skus":[{"sku_id":7.0},{"sku_id":1e2}],"name":"x"}`), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.SKUs) != 2 || v.SKUs[0].SKUID != 7 || v.SKUs[1].SKUID != 100 || v.Name != "x" {
		t.Fatalf("decoded %+v", v)
	}
	for _, bad := range []string{`{"skus":[{"sku_id":7.5}]}`, `{"skus":[{"sku_id":1e30}]}`, `{"name":null}`, `{"skus":[null]}`, `null`} {
		if err := jsonx.Strict([]byte(bad), &v); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestLenientIgnoresUnknownFieldsAndTakesWholeNumbers(t *testing.T) {
	var v struct {
		Amount int64 `json:"amount_cents"`
	}
	if err := jsonx.Lenient([]byte(`{"extra":{"x":1.5,"y":null},"amount_cents":226.0}`), &v); err != nil || v.Amount != 226 {
		t.Fatalf("Lenient = %v, %+v", err, v)
	}
	if err := jsonx.Lenient([]byte(`{"amount_cents":2.5}`), &v); err == nil {
		t.Fatal("2.5 accepted as an integer")
	}
}
