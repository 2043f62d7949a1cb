// Package e2e holds end-to-end tests of several services working together
// on embedded NATS and a real PostgreSQL.
package e2e
