#!/usr/bin/env bash
# Builds etcd and ONE multicall Kubernetes binary (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy, kubectl) from the Go module proxy, and caches them. The
# component is chosen by the name the binary is started under (the cache holds a symlink per
# component) or by a first argument: `kube kubelet --config ...`.
#
#   hack/cluster/build-binaries.sh     # prints the directory holding etcd, kube and the symlinks
#
# The cache lives in $BOARDREADYOPS_CLUSTER_BIN_DIR (default: $XDG_CACHE_HOME or ~/.cache, then
# boardreadyops/cluster/k8s-<version>-etcd-<version>). A complete directory is reused as is; delete
# it to rebuild. Like hack/envtest/build-binaries.sh, the build runs in a throwaway scratch module
# with the staging `replace` lines, so Kubernetes never enters the project's go.mod files; the two
# scripts share the Go build cache, so whichever runs second compiles little.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}"
out="${BOARDREADYOPS_CLUSTER_BIN_DIR:-$cache_root/boardreadyops/cluster/k8s-$K8S_VERSION-etcd-$ETCD_VERSION}"
components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

log() { echo "cluster-binaries: $*" >&2; }

complete() {
	[[ -x "$out/etcd" && -x "$out/kube" ]] || return 1
	for c in "${components[@]}"; do [[ -L "$out/$c" ]] || return 1; done
}
if complete; then
	echo "$out"
	exit 0
fi
mkdir -p "$out"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=local

# etcd: the envtest build's copy when it exists (same version), else a build of our own.
envtest_etcd="$cache_root/boardreadyops/envtest/k8s-$K8S_VERSION-etcd-$ETCD_VERSION/etcd"
if [[ ! -x "$out/etcd" ]]; then
	if [[ -x "$envtest_etcd" ]]; then
		cp "$envtest_etcd" "$out/etcd.tmp"
	else
		log "building etcd $ETCD_VERSION"
		mkdir -p "$scratch/etcd" && cd "$scratch/etcd"
		go mod init cluster/etcd >/dev/null 2>&1
		go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
		go build -trimpath -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
	fi
	mv "$out/etcd.tmp" "$out/etcd"
fi

if [[ ! -x "$out/kube" ]]; then
	log "building the multicall kube $K8S_VERSION (slow on a cold build cache: ~20 min on 2 cores)"
	minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
	staging="v0.${K8S_VERSION#v1.}"
	mkdir -p "$scratch/k8s" && cd "$scratch/k8s"
	go mod init cluster/kube >/dev/null 2>&1
	go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >"$scratch/k8s.json"
	gomod="$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' "$scratch/k8s.json")"
	{
		echo "require k8s.io/kubernetes $K8S_VERSION"
		grep -E '^\s*k8s\.io/[a-z0-9.-]+ v0\.0\.0\s*$' "$gomod" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
	} >>go.mod
	cat >main.go <<'GO'
// Command kube is every Kubernetes component this repository's single-node cluster runs, in one
// binary: the component is the name it was started under, or its first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // CronJob time zones

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kube-proxy":              proxy.NewProxyCommand,
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && name != "kubectl" && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	if name == "kubectl" {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: kube {kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|kubectl} [flags]")
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
GO
	go get k8s.io/kubernetes/cmd/kube-apiserver/app k8s.io/kubernetes/cmd/kube-controller-manager/app \
		k8s.io/kubernetes/cmd/kube-scheduler/app k8s.io/kubernetes/cmd/kubelet/app \
		k8s.io/kubernetes/cmd/kube-proxy/app k8s.io/kubectl/pkg/cmd github.com/spf13/cobra >&2
	ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
	ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
	ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
	ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
	ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
	go build -trimpath -ldflags "$ldflags" -o "$out/kube.tmp" .
	mv "$out/kube.tmp" "$out/kube"
fi
for c in "${components[@]}"; do ln -sfn kube "$out/$c"; done
"$out/kubelet" --version >&2
"$out/kubectl" version --client >&2
echo "$out"
