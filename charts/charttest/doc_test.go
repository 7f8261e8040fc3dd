// Package charttest tests the Helm chart in charts/boardreadyops with Helm's own Go packages: it
// lints and renders the chart for the value sets in charts/boardreadyops/ci, decodes every
// rendered object strictly into its Kubernetes type, checks the restricted Pod Security Standard,
// and creates every object with a server-side dry run (strict field validation) against a real
// kube-apiserver started by envtest, with the chart's CRD and the Prometheus Operator CRDs
// installed. TestChartRefusesWhatTheServicesRefuse holds the chart to the bounds the services
// enforce at startup, running their binaries on what it rendered. TestCRDUpgradesWithTheChart runs Helm's own install, upgrade and uninstall actions
// against a second envtest API server to show that the CRD, a template, upgrades with the chart.
package charttest
