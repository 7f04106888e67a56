//go:build failpoints

package failpoint

// Enabled: this binary was built with -tags failpoints (tests, the chaos
// harness): failpoints can be armed.
const Enabled = true
