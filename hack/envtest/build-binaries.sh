#!/usr/bin/env bash
# Builds the etcd and kube-apiserver binaries that controller-runtime's envtest starts, from the Go
# module proxy (they cannot be downloaded as release archives here), and caches them.
#
#   hack/envtest/build-binaries.sh            # prints the directory holding etcd and kube-apiserver
#   KUBEBUILDER_ASSETS=$(hack/envtest/build-binaries.sh) go test ./...
#
# The cache lives in $BOARDREADYOPS_ENVTEST_DIR (default: $XDG_CACHE_HOME or ~/.cache, then
# boardreadyops/envtest/k8s-<version>-etcd-<version>). A directory holding both binaries is reused
# as is; delete it to rebuild. The build runs in throwaway scratch modules so that neither
# Kubernetes nor etcd ever enters the project's own go.mod files. Budget: ~2 min for etcd and
# ~16 min plus ~3 GB of build cache for kube-apiserver on 2 cores.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}"
out="${BOARDREADYOPS_ENVTEST_DIR:-$cache_root/boardreadyops/envtest/k8s-$K8S_VERSION-etcd-$ETCD_VERSION}"

log() { echo "envtest-binaries: $*" >&2; }

if [[ -x "$out/etcd" && -x "$out/kube-apiserver" ]]; then
	echo "$out"
	exit 0
fi
mkdir -p "$out"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=local

# etcd: the cluster build's copy when it exists (same version; hack/cluster/build-binaries.sh),
# else a build of our own.
cluster_etcd="$cache_root/boardreadyops/cluster/k8s-$K8S_VERSION-etcd-$ETCD_VERSION/etcd"
if [[ ! -x "$out/etcd" && -x "$cluster_etcd" ]]; then
	cp "$cluster_etcd" "$out/etcd.tmp" && mv "$out/etcd.tmp" "$out/etcd"
fi
if [[ ! -x "$out/etcd" ]]; then
	log "building etcd $ETCD_VERSION"
	mkdir -p "$scratch/etcd" && cd "$scratch/etcd"
	go mod init envtest/etcd >/dev/null 2>&1
	go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
	go build -trimpath -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3
	mv "$out/etcd.tmp" "$out/etcd"
fi

if [[ ! -x "$out/kube-apiserver" ]]; then
	log "building kube-apiserver $K8S_VERSION (slow: ~16 min on 2 cores)"
	minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
	staging="v0.${K8S_VERSION#v1.}"
	mkdir -p "$scratch/k8s" && cd "$scratch/k8s"
	go mod init envtest/kube-apiserver >/dev/null 2>&1
	# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local paths;
	# a consumer must replace each with the published release of the same line.
	go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >"$scratch/k8s.json"
	gomod="$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' "$scratch/k8s.json")"
	{
		echo "require k8s.io/kubernetes $K8S_VERSION"
		grep -E '^\s*k8s\.io/[a-z0-9.-]+ v0\.0\.0\s*$' "$gomod" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
	} >>go.mod
	go mod tidy -e >/dev/null 2>&1 || true
	cat >main.go <<'GO'
package main

import _ "k8s.io/kubernetes/cmd/kube-apiserver/app"

func main() {}
GO
	go get k8s.io/kubernetes/cmd/kube-apiserver >&2
	rm main.go
	ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
	ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
	ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
	go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
	mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
fi
"$out/kube-apiserver" --version >&2
"$out/etcd" --version | head -1 >&2
echo "$out"
