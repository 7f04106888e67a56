package sale

import (
	"strings"
	"testing"
	"time"
)

func TestValidateCountsNameInCharacters(t *testing.T) {
	now := time.Now()
	a := Activity{ActivityID: 1, StartsAt: now, EndsAt: now.Add(time.Hour), PaymentTimeoutSeconds: 60,
		OrderDeadlineSeconds: 60, SKUs: []SKU{{SKUID: 1, Stock: 1}}}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("é", 200), true}, // 400 bytes, 200 characters: what PostgreSQL's length() counts
		{strings.Repeat("é", 201), false},
		{"限时秒杀", true},
		{"tab\there", false},
		{"del\x7f", false},
	} {
		a.Name = tc.name
		err := a.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("name %q: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && err.(*FieldError).Field != "name" {
			t.Errorf("name %q: field %q, want name", tc.name, err.(*FieldError).Field)
		}
	}
}

func TestValidateCurrency(t *testing.T) {
	now := time.Now()
	a := Activity{ActivityID: 1, Name: "a", StartsAt: now, EndsAt: now.Add(time.Hour), PaymentTimeoutSeconds: 60,
		OrderDeadlineSeconds: 60, SKUs: []SKU{{SKUID: 1, Stock: 1}}}
	if err := a.Validate(); err != nil {
		t.Errorf("currency absent: Validate() = %v, want the default", err)
	}
	for _, tc := range []struct {
		currency string
		ok       bool
	}{
		{"", false}, // present but empty: the schema refuses it, so does the server
		{"CNY", true},
		{"EUR", true},
		{"cny", false},
		{"CN", false},
		{"CNYY", false},
		{"C1Y", false},
		{"ÇNY", false},
	} {
		a.Currency = &tc.currency
		err := a.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("currency %q: Validate() = %v, want ok=%v", tc.currency, err, tc.ok)
		}
		if err != nil && err.(*FieldError).Field != "currency" {
			t.Errorf("currency %q: field %q, want currency", tc.currency, err.(*FieldError).Field)
		}
	}
}
