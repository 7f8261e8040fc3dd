// Package docscheck holds tests that keep the documentation true to the repository: every alert's
// runbook link points at an existing section of docs/operations.md.
package docscheck
