package webhook_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/services/ingest/internal/store"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// smuggledPush is a genuine, signed JSON push of a branch whose commit message carries a form
// field "payload" holding another document: a tag push for another installation and repository.
func smuggledPush(t *testing.T) []byte {
	t.Helper()
	inner, _ := json.Marshal(map[string]any{
		"ref": "refs/tags/v9.9.9", "before": strings.Repeat("0", 40), "after": strings.Repeat("b", 40), "created": true, "deleted": false,
		"installation": map[string]any{"id": 666}, "repository": map[string]any{"id": 6666, "full_name": "victim/repo", "owner": map[string]any{"login": "victim"}},
	})
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as GitHub sends it: '&' is not escaped
	_ = enc.Encode(map[string]any{
		"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": strings.Repeat("a", 40), "created": false, "deleted": false,
		"installation": map[string]any{"id": 1}, "repository": map[string]any{"id": 11, "full_name": "attacker/repo", "owner": map[string]any{"login": "attacker"}},
		"head_commit": map[string]any{"message": "x&payload=" + url.QueryEscape(string(inner)) + "&z="},
	})
	body := bytes.TrimSpace(b.Bytes())
	if form, err := url.ParseQuery(string(body)); err != nil || form.Get("payload") != string(inner) {
		t.Fatalf("the smuggled body does not parse as a form carrying the inner document: %v", err)
	}
	return body
}

// The content-type swap: a signed JSON body resent as a form. JSON is the configured encoding,
// so the form is refused; with form configured, a body that is more than one payload field is.
func TestContentTypeSwapStoresNothing(t *testing.T) {
	t.Parallel()
	body := smuggledPush(t)
	const form = "application/x-www-form-urlencoded"
	tests := []struct {
		name        string
		configured  webhook.ContentType
		contentType string
		status      int
		result      string
	}{
		{"json configured, resent as form", "", form, http.StatusUnsupportedMediaType, webhook.ResultRejectedContentType},
		{"form configured, json body with a payload field", webhook.ContentTypeForm, form, http.StatusBadRequest, webhook.ResultRejectedPayload},
		{"form configured, sent as json", webhook.ContentTypeForm, "application/json", http.StatusUnsupportedMediaType, webhook.ResultRejectedContentType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setupWith(t, func(e *env, o *webhook.Options) { o.ContentType = tt.configured })
			status, _, resp := e.send(t, req{event: "push", body: body, contentType: tt.contentType})
			if status != tt.status {
				t.Fatalf("status %d %v, want %d", status, resp, tt.status)
			}
			if inbox, jobs := e.rows(t); inbox != 0 || jobs != 0 {
				t.Fatalf("%d inbox rows and %d jobs written", inbox, jobs)
			}
			if testutilCount(t, e, tt.result) != 1 {
				t.Fatalf("result %s not counted", tt.result)
			}
		})
	}
	// The genuine delivery, as configured, is the branch push it is (stored with the filter off;
	// with it on, a branch push is filtered).
	e := setupWith(t, func(_ *env, o *webhook.Options) { o.KeepUnused = true })
	if status, _, _ := e.send(t, req{event: "push", body: body}); status != http.StatusAccepted {
		t.Fatalf("genuine delivery: %d", status)
	}
	var repo int64
	if err := e.pool.QueryRow(t.Context(), `SELECT repository_id FROM webhook_inbox`).Scan(&repo); err != nil || repo != 11 {
		t.Fatalf("stored repository %d (%v), want 11", repo, err)
	}
}

// The event swap: a signed repository.deleted body resent as an installation event is refused
// with the reason, and nothing is written.
func TestEventSwapStoresNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := fixture(t, "repository.deleted")
	status, _, resp := e.send(t, req{event: "installation", body: body})
	if status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(resp["message"]), "not a installation payload (needs installation.account.login)") {
		t.Fatalf("status %d %v", status, resp)
	}
	if inbox, jobs := e.rows(t); inbox != 0 || jobs != 0 {
		t.Fatalf("%d inbox rows and %d jobs written", inbox, jobs)
	}
}

func TestFullNameOutsideGitHubsCharacterSetStoresNothing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := bytes.Replace(fixture(t, "push.tag_created"), []byte(`"full_name": "octo-org/hello-world"`), []byte(`"full_name": "octo-org/../../orgs/x/hooks?"`), 1)
	if bytes.Equal(body, fixture(t, "push.tag_created")) {
		t.Fatal("fixture has no full_name to replace")
	}
	status, _, resp := e.send(t, req{event: "push", body: body})
	if status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(resp["message"]), "full_name") {
		t.Fatalf("status %d %v", status, resp)
	}
	if inbox, _ := e.rows(t); inbox != 0 {
		t.Fatal("stored")
	}
}

// The pre-allocation bomb: connections that announce 25 MiB and send nothing. The budget counts
// memory allocated as bytes arrive, so at the smallest budget (one maximal delivery) they hold
// almost none of it and a genuine delivery is accepted; each of them is cut off as too slow.
func TestAnnouncedLengthsTakeNoBudget(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(e *env, o *webhook.Options) { o.BodyBudget = webhook.MaxBody })
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	const bombs = 4
	answers := make(chan string, bombs)
	for i := 0; i < bombs; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: bomb-%d\r\nContent-Length: %d\r\n\r\n{", i, webhook.MaxBody)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers <- err.Error()
				return
			}
			resp.Body.Close()
			answers <- resp.Status
		}()
	}
	client := &http.Client{Timeout: 10 * time.Second} // GitHub's own timeout
	for i := 0; i < 3; i++ {
		body := bytes.Replace(fixture(t, "ping"), []byte(`"zen": "`), []byte(fmt.Sprintf(`"zen": "genuine %d `, i)), 1)
		r, _ := http.NewRequest(http.MethodPost, e.srv.URL, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-GitHub-Event", "ping")
		r.Header.Set("X-GitHub-Delivery", fmt.Sprintf("genuine-%d", i))
		r.Header.Set("X-Hub-Signature-256", hubsig.Sign(testSecret, body))
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("genuine delivery %d during the bomb: %s", i, resp.Status)
		}
	}
	for i := 0; i < bombs; i++ {
		if a := <-answers; a != "408 Request Timeout" {
			t.Fatalf("announcing connection answered %q, want 408 (cut off as too slow)", a)
		}
	}
	if testutilCount(t, e, webhook.ResultRejectedSlow) != bombs {
		t.Fatal("slow bodies not counted")
	}
}

// A trickling client — a few bytes now and then, never stalling long — is cut off by the minimum
// transfer rate, well before the read timeout (here a minute, longer than the whole trickle).
func TestTricklingClientIsCutOff(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(e *env, o *webhook.Options) { o.ReadTimeout = time.Minute })
	body := fixture(t, "ping")
	c, answered := rawPost(t, e, "trickle", body, len(body))
	// 10 bytes a second: the whole body would take about a minute.
	tick := time.NewTicker(time.Second / 10)
	defer tick.Stop()
	for sent := 0; sent < len(body); sent++ {
		select {
		case a := <-answered:
			if a != "408 Request Timeout" {
				t.Fatalf("answered %q, want 408", a)
			}
			if inbox, _ := e.rows(t); inbox != 0 {
				t.Fatal("stored")
			}
			return
		case <-tick.C:
		}
		if _, err := c.Write(body[sent : sent+1]); err != nil {
			break // cut off
		}
	}
	if a := <-answered; a != "408 Request Timeout" {
		t.Fatalf("trickling client got to send its whole body (%d bytes); answered %q", len(body), a)
	}
}

func testutilCount(t *testing.T, e *env, result string) int {
	t.Helper()
	return int(testutil.ToFloat64(counter(t, e.reg, result)))
}

// groupStore is the store as ingest runs it by default: deliveries committed in groups.
// inBothStoreModes runs f in parallel subtests, on a handler that stores each delivery alone and
// on one that stores them in group commits.
func inBothStoreModes(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("group commit %v", grouped), func(t *testing.T) {
			t.Parallel()
			f(t, setupWith(t, func(e *env, o *webhook.Options) {
				if grouped {
					o.Store = groupStore(t, e)
				}
			}))
		})
	}
}

func groupStore(t *testing.T, e *env) webhook.Store {
	t.Helper()
	g := groupcommit.New(e.pool, slog.New(slog.DiscardHandler), 64, 5*time.Second)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); g.Run(quit) }()
	t.Cleanup(func() { close(quit); <-done })
	return &store.Store{DB: e.pool, Group: g}
}

// The replay: a captured body resent later under a fresh delivery id. The body's digest is known,
// so it is answered as a duplicate, counted as replayed, logged once without the body, and
// nothing is written — for stored and for ignored events, alone and in group commits. GitHub's own
// redelivery (the same delivery id) is still a plain duplicate.
func TestReplayUnderNewDeliveryIDWritesNothing(t *testing.T) {
	t.Parallel()
	inBothStoreModes(t, func(t *testing.T, e *env) {
		body := fixture(t, "check_run.rerequested")
		if status, _, _ := e.send(t, req{event: "check_run", delivery: "original-1", body: body}); status != http.StatusAccepted {
			t.Fatalf("original: %d", status)
		}
		status, _, resp := e.send(t, req{event: "check_run", delivery: "fresh-id-2", body: body})
		if status != http.StatusOK || resp["status"] != webhook.ResultDuplicate {
			t.Fatalf("replay: %d %v, want 200 duplicate", status, resp)
		}
		if status, _, _ := e.send(t, req{event: "check_run", delivery: "original-1", body: body}); status != http.StatusOK {
			t.Fatalf("GitHub's redelivery: %d, want 200", status)
		}
		if inbox, jobs := e.rows(t); inbox != 1 || jobs != 1 {
			t.Fatalf("%d inbox rows and %d jobs, want the original only", inbox, jobs)
		}
		if testutilCount(t, e, webhook.ResultReplayed) != 1 || testutilCount(t, e, webhook.ResultDuplicate) != 1 {
			t.Fatalf("replayed %d duplicate %d, want 1 and 1", testutilCount(t, e, webhook.ResultReplayed), testutilCount(t, e, webhook.ResultDuplicate))
		}
		logs := e.logs.String()
		if strings.Count(logs, "replayed under a new delivery id") != 1 || !strings.Contains(logs, "delivery_id=fresh-id-2") {
			t.Fatalf("replay not logged once with its delivery id:\n%s", logs)
		}
		if strings.Contains(logs, "octocat") || strings.Contains(logs, "rerequested") || strings.Contains(logs, "check_run\":") {
			t.Fatalf("log carries the body:\n%s", logs)
		}

		// An ignored event's body is remembered too.
		issues := []byte(`{"action":"opened","issue":{"number":1}}`)
		if status, _, resp := e.send(t, req{event: "issues", delivery: "issues-1", body: issues}); status != http.StatusAccepted || resp["status"] != "ignored" {
			t.Fatalf("ignored event: %d %v", status, resp)
		}
		if status, _, _ := e.send(t, req{event: "issues", delivery: "issues-1", body: issues}); status != http.StatusAccepted {
			t.Fatalf("GitHub's redelivery of an ignored event: %d", status)
		}
		if status, _, _ := e.send(t, req{event: "issues", delivery: "issues-2", body: issues}); status != http.StatusOK {
			t.Fatalf("replayed ignored event: %d, want 200", status)
		}
		// ... and under another event's name it is still the same body.
		if status, _, _ := e.send(t, req{event: "check_run", delivery: "fresh-id-3", body: issues}); status == http.StatusAccepted {
			t.Fatal("an ignored event's body was accepted under another event")
		}
		if testutilCount(t, e, webhook.ResultReplayed) != 2 {
			t.Fatalf("replayed %d, want 2", testutilCount(t, e, webhook.ResultReplayed))
		}
	})
}

// Replays racing each other and the original: of twenty deliveries of one body under twenty
// delivery ids, exactly one is stored.
func TestConcurrentReplaysStoreOne(t *testing.T) {
	t.Parallel()
	inBothStoreModes(t, func(t *testing.T, e *env) {
		body := fixture(t, "installation.created")
		statuses := make(chan int, 20)
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, _, _ := e.send(t, req{event: "installation", delivery: fmt.Sprintf("race-%02d", i), body: body})
				statuses <- status
			}()
		}
		wg.Wait()
		close(statuses)
		counts := map[int]int{}
		for s := range statuses {
			counts[s]++
		}
		if counts[202] != 1 || counts[200] != 19 {
			t.Fatalf("statuses %v, want one 202 and nineteen 200", counts)
		}
		if inbox, jobs := e.rows(t); inbox != 1 || jobs != 1 {
			t.Fatalf("%d inbox rows, %d jobs", inbox, jobs)
		}
	})
}

// The largest delivery GitHub sends (25 MiB) still fits the smallest budget: the buffer's growth
// takes only what it adds.
func TestMaximalDeliveryFitsTheSmallestBudget(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(_ *env, o *webhook.Options) { o.BodyBudget = webhook.MaxBody })
	head := bytes.TrimRight(bytes.TrimSpace(fixture(t, "ping")), "}")
	pad := webhook.MaxBody - len(head) - len(`,"pad":""}`)
	body := append(append(head, []byte(`,"pad":"`+strings.Repeat("x", pad)+`"`)...), '}')
	if len(body) != webhook.MaxBody {
		t.Fatalf("body is %d bytes, want %d", len(body), webhook.MaxBody)
	}
	if status, _, resp := e.send(t, req{event: "ping", body: body}); status != http.StatusAccepted {
		t.Fatalf("25 MiB delivery: %d %v", status, resp)
	}
}

// An ignored body resent with its own delivery id under the name of an event that is stored is a
// duplicate (migration 00073): only its digest was kept, and the body fits the repository
// event's shape, so it was stored as a repository deletion. In both store modes.
func TestIgnoredBodyResentAsAnotherEventWritesNothing(t *testing.T) {
	t.Parallel()
	inBothStoreModes(t, func(t *testing.T, e *env) {
		body := []byte(`{"action":"deleted","label":{"id":1,"name":"bug"},"repository":{"id":42,"full_name":"octo-org/hello-world"},"installation":{"id":7}}`)
		if status, _, resp := e.send(t, req{event: "label", delivery: "label-1", body: body}); status != http.StatusAccepted || resp["status"] != "ignored" {
			t.Fatalf("label event: %d %v, want 202 ignored", status, resp)
		}
		status, _, resp := e.send(t, req{event: "repository", delivery: "label-1", body: body})
		if status == http.StatusAccepted {
			t.Fatalf("the label body resent as a repository event: %d %v, want it refused", status, resp)
		}
		if inbox, jobs := e.rows(t); inbox != 0 || jobs != 0 {
			t.Fatalf("%d inbox rows and %d jobs, want none", inbox, jobs)
		}
	})
}
