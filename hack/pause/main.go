// Command pause is the pod sandbox ("infra") container of the single-node cluster that
// hack/cluster starts: it holds the pod's namespaces, reaps the zombies it inherits as PID 1, and
// exits on SIGTERM or SIGINT. Public registries, and so registry.k8s.io/pause, are out of reach on
// the machines the cluster runs on; hack/images builds this program into the pause image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
