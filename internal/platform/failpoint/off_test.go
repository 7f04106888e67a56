//go:build !failpoints

package failpoint

import "testing"

// A production build cannot arm a failpoint: the variable is refused, Arm
// panics, Check never fires.
func TestProductionBuildRefusesFailpoints(t *testing.T) {
	if _, err := Parse(AfterOrderInsert + "=1:crash"); err == nil {
		t.Fatal("SECKILL_FAILPOINTS accepted by a build without failpoints")
	}
	if s, err := Parse(""); err != nil || s.Check(AfterOrderInsert) != nil {
		t.Fatalf("empty spec = %v, %v", s, err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Arm did not panic in a build without failpoints")
		}
	}()
	(&Set{}).Arm(AfterOrderInsert, 1)
}
