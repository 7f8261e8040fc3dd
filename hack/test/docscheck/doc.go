// Package docscheck holds tests that keep the documentation true to the repository: every alert's
// runbook link points at an existing section of docs/operations.md, and the dashboards keep their
// conventions (rate windows, variables, descriptions, units, links) and name only real metrics.
package docscheck
