package main

import "net/url"

// redactDSN drops the password from a connection string before it is printed.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "<unparseable dsn>"
	}
	return u.Redacted()
}
