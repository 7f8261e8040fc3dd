// Command githubsim serves the GitHub API simulator (pkg/githubsim) for the local run and load
// runs: it verifies the App JWT with the App's key, answers check-run and workflow-dispatch
// requests, and plays dispatched runs by sending signed workflow_run webhooks to --webhook-url,
// with the check_run and check_suite webhooks GitHub sends about check runs (--check-events).
//
//	githubsim --listen 127.0.0.1:18090 --app-id 1 --app-key-file key.pem \
//	    --webhook-url http://127.0.0.1:8080/webhook --webhook-secret-file secret
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "githubsim:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:18090", "address to serve the API on")
	appID := flag.Int64("app-id", 0, "the App id its JWTs must carry")
	keyFile := flag.String("app-key-file", "", "the App's private (or public) key, PEM")
	webhookURL := flag.String("webhook-url", "", "where to send workflow_run webhooks of dispatched runs (empty: none)")
	secretFile := flag.String("webhook-secret-file", "", "webhook secret file (first line signs)")
	runDelay := flag.Duration("run-delay", time.Second, "delay between a run's requested, in_progress and completed")
	failTags := flag.String("fail-tags", "", "the first run of a tag containing this text concludes failure, re-runs succeed (empty: all succeed)")
	retain := flag.Int("retain-finished", 0, "keep at most this many finished check runs and workflow runs, and webhook deliveries in the delivery log, forgetting the oldest (0: all check runs and workflow runs, as GitHub, and the newest 100,000 deliveries); for load runs")
	auto := flag.Bool("auto-repositories", true, "accept any repository of any installation, with the release workflow")
	autoTags := flag.Bool("auto-tags", true, "every tag exists, at githubsim.AutoTagCommit(repository, tag): the commit the load tool and the demo push it at")
	senders := flag.Int("webhook-senders", 8, "webhooks sent at once (GitHub sends many deliveries concurrently)")
	checkEvents := flag.Bool("check-events", true, "send check_run created/completed and check_suite completed for the App's check runs and each dispatched run's job, as GitHub sends an App with the checks permission (false: workflow_run webhooks only)")
	var limits githubsim.Limits
	flag.IntVar(&limits.Budget, "budget", 0, "primary budget of each installation per hour, reported in x-ratelimit headers (0: unlimited)")
	flag.IntVar(&limits.MaxConcurrent, "max-concurrent", 0, "secondary limit: requests in flight per installation (0: none)")
	flag.DurationVar(&limits.MutationInterval, "mutation-interval", 0, "secondary limit: least time between an installation's mutating requests (0: none)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *appID <= 0 || *keyFile == "" {
		return errors.New("--app-id and --app-key-file are required")
	}
	if *senders < 1 || *senders > 1024 {
		return errors.New("--webhook-senders must be 1..1024")
	}
	keyPEM, err := os.ReadFile(*keyFile)
	if err != nil {
		return err
	}
	pub, err := githubsim.PublicKeyFromPEM(keyPEM)
	if err != nil {
		return fmt.Errorf("app key: %w", err)
	}
	var secret []byte
	if *secretFile != "" {
		raw, err := os.ReadFile(*secretFile)
		if err != nil {
			return err
		}
		secret = []byte(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	}
	opts := githubsim.Options{AppID: *appID, AppPublicKey: pub, AutoRepositories: *auto, AutoTags: *autoTags, WebhookURL: *webhookURL,
		WebhookSecret: secret, RunDelay: *runDelay, RetainFinished: *retain, WebhookSenders: *senders, CheckEvents: *checkEvents, Logger: logger}
	if *failTags != "" {
		var mu sync.Mutex
		seen := map[string]bool{}
		opts.Conclusion = func(repo, ref string, _ map[string]string) string {
			mu.Lock()
			defer mu.Unlock()
			first := !seen[repo+"@"+ref]
			seen[repo+"@"+ref] = true
			if first && strings.Contains(ref, *failTags) {
				return "failure"
			}
			return "success"
		}
	}
	sim := githubsim.New(opts)
	defer sim.Close()
	sim.SetLimits(limits)

	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logger.Info("GitHub API simulator listening", "addr", l.Addr().String(), "webhook_url", *webhookURL)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
