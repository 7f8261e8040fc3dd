// Package cluster is the end-to-end test on a real single-node Kubernetes cluster (`make
// test-cluster`, root only, behind the build tag "cluster" so that `make test` never runs it):
// images built and pushed to the loopback registry, the chart installed with Helm's Go SDK,
// signed webhooks through ingest's Service, scaling and a pod kill under load, an upgrade with a
// new migration, the operator's scrapes, and uninstall. See docs/kubernetes.md.
package cluster
