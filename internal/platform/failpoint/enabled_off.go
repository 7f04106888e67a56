//go:build !failpoints

package failpoint

// Enabled: this binary was built without -tags failpoints (production):
// every Check compiles to nothing and arming one is refused.
const Enabled = false
