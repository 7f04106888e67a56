package reservation

import "time"

// SetClock makes r read the time from now (tests of the hold grace).
func SetClock(r *Reserver, now func() time.Time) { r.now = now }
