//go:build !failpoints

package orders

import (
	"context"
	"errors"
)

// createStatement is the statement of one Create: always the production
// call. A build without failpoints decides none (failpoint.Set.Next), so
// failAt is always empty here.
func (s *Store) createStatement(_ context.Context, failAt string) (string, []any, error) {
	if failAt != "" {
		return "", nil, errors.New("orders: failpoint " + failAt + " in a build without failpoints")
	}
	return createSQL, nil, nil
}

// prepareFailpoints has nothing to prepare in a build without failpoints.
func (s *Store) prepareFailpoints(context.Context, []string) error { return nil }

// InstallFailpoints has nothing to install in a build without failpoints.
func InstallFailpoints(context.Context, string) error { return nil }
