package config

import (
	"errors"
	"testing"
)

func TestActivityAttemptsAlert(t *testing.T) {
	t.Setenv("SECKILL_ENV", "development")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.ActivityAttemptsAlert != 10 {
		t.Errorf("default SECKILL_ACTIVITY_ATTEMPTS_ALERT = %d, want 10", c.ActivityAttemptsAlert)
	}

	t.Setenv("SECKILL_ACTIVITY_ATTEMPTS_ALERT", "3")
	if c, err = Load(); err != nil || c.ActivityAttemptsAlert != 3 {
		t.Errorf("SECKILL_ACTIVITY_ATTEMPTS_ALERT=3: got %d, %v", c.ActivityAttemptsAlert, err)
	}

	for _, v := range []string{"0", "-1"} {
		t.Setenv("SECKILL_ACTIVITY_ATTEMPTS_ALERT", v)
		_, err := Load()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Var != "SECKILL_ACTIVITY_ATTEMPTS_ALERT" {
			t.Errorf("SECKILL_ACTIVITY_ATTEMPTS_ALERT=%s: error %v, want a FieldError naming the variable", v, err)
		}
	}
}
