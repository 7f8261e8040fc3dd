package githubsim

import (
	"container/heap"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/boardreadyops/cloud/pkg/hubsig"
)

// HookDelivery is one webhook delivery as GET /app/hook/deliveries lists it.
type HookDelivery struct {
	ID             int64     `json:"id"`
	GUID           string    `json:"guid"`
	DeliveredAt    time.Time `json:"delivered_at"`
	Redelivery     bool      `json:"redelivery"`
	Duration       float64   `json:"duration"`
	Status         string    `json:"status"`
	StatusCode     int       `json:"status_code"`
	Event          string    `json:"event"`
	Action         string    `json:"action"`
	InstallationID int64     `json:"installation_id"`
	RepositoryID   int64     `json:"repository_id"`
	payload        []byte
}

// Deliveries returns copies of every webhook delivery attempt, oldest first.
func (s *Simulator) Deliveries() []HookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]HookDelivery, len(s.deliveries))
	for i, d := range s.deliveries {
		out[i] = *d
	}
	return out
}

// RecordDelivery adds a delivery to the App's delivery log without sending it (tests of
// redelivery: a delivery GitHub attempted that failed).
func (s *Simulator) RecordDelivery(guid, event, action string, statusCode int, payload []byte, at time.Time) int64 {
	return s.record(guid, event, action, statusCode, payload, at, false)
}

// RecordRedelivery records a redelivery attempt (listed with "redelivery": true), as
// RecordDelivery records a first delivery.
func (s *Simulator) RecordRedelivery(guid, event, action string, statusCode int, payload []byte, at time.Time) int64 {
	return s.record(guid, event, action, statusCode, payload, at, true)
}

func (s *Simulator) record(guid, event, action string, statusCode int, payload []byte, at time.Time, redelivery bool) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &HookDelivery{ID: s.id(), GUID: guid, DeliveredAt: at, Redelivery: redelivery, StatusCode: statusCode,
		Status: deliveryStatus(statusCode), Event: event, Action: action, payload: payload}
	s.appendDeliveryLocked(d)
	return d.ID
}

// appendDeliveryLocked adds d to the delivery log (s.mu held), keeping the newest deliveriesKept.
func (s *Simulator) appendDeliveryLocked(d *HookDelivery) {
	s.deliveries = append(s.deliveries, d)
	if keep := s.deliveriesKept(); len(s.deliveries) > keep {
		s.deliveries = s.deliveries[len(s.deliveries)-keep:]
	}
}

func deliveryStatus(code int) string {
	if code >= 200 && code < 300 {
		return "OK"
	}
	if code == 0 {
		return "Timed out"
	}
	return fmt.Sprintf("Invalid HTTP Response: %d", code)
}

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// send posts one signed webhook to the configured URL and records the delivery.
func (s *Simulator) send(ctx context.Context, p poster, guid, event, action string, payload []byte, redelivery bool) int {
	start := s.now()
	code := p.post(ctx, s.opts.WebhookURL, &hookHeader{event: event, guid: guid, signature: hubsig.Sign(s.opts.WebhookSecret, payload)}, payload)
	s.mu.Lock()
	s.appendDeliveryLocked(&HookDelivery{ID: s.id(), GUID: guid, DeliveredAt: start.UTC(), Redelivery: redelivery,
		Duration: s.now().Sub(start).Seconds(), Status: deliveryStatus(code), StatusCode: code, Event: event, Action: action, payload: payload})
	s.mu.Unlock()
	return code
}

// hookPayload is a webhook body the simulator sends on its own (workflow_run, check_run,
// check_suite), as a struct: encoding maps of interfaces was most of its encoding time.
type hookPayload struct {
	Action       string           `json:"action"`
	WorkflowRun  *WorkflowRun     `json:"workflow_run,omitempty"`
	Workflow     *hookWorkflow    `json:"workflow,omitempty"`
	CheckRun     *checkRunPayload `json:"check_run,omitempty"`
	CheckSuite   *checkSuiteRef   `json:"check_suite,omitempty"`
	Repository   hookRepository   `json:"repository"`
	Installation struct {
		ID int64 `json:"id"`
	} `json:"installation"`
	Sender hookAccount `json:"sender"`
}

type hookWorkflow struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Path  string `json:"path"`
	State string `json:"state"`
}

type hookRepository struct {
	ID            int64       `json:"id"`
	Name          string      `json:"name"`
	FullName      string      `json:"full_name"`
	Private       bool        `json:"private"`
	Owner         hookAccount `json:"owner"`
	DefaultBranch string      `json:"default_branch"`
}

// hookAccount is a repository's owner or a webhook's sender.
type hookAccount struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

// newHookPayload is a payload about a repository of an installation, sent by the bot login.
func newHookPayload(action string, repo repoRef, bot string) hookPayload {
	owner, name, _ := strings.Cut(repo.fullName, "/")
	p := hookPayload{Action: action, Repository: hookRepository{ID: repo.id, Name: name, FullName: repo.fullName, Private: true,
		Owner: hookAccount{owner, "Organization"}, DefaultBranch: "main"}, Sender: hookAccount{bot, "Bot"}}
	p.Installation.ID = repo.installationID
	return p
}

// deliveriesKept is how many deliveries the log keeps, payloads and all, the newest: journalCap,
// or Options.RetainFinished when that is set and smaller. GitHub keeps three days of them; a load
// run of 50,000 release runs sends 150,000, a few KiB each, and holding them all was most of the
// simulator's heap, whose growth (page faults, the collector) was measured on the shared cores.
func (s *Simulator) deliveriesKept() int {
	if r := s.opts.RetainFinished; r > 0 && r < journalCap {
		return r
	}
	return journalCap
}

// listDeliveries: GET /app/hook/deliveries (per_page, cursor), newest first; the cursor is the id
// of the last delivery of the previous page.
func (s *Simulator) listDeliveries(w http.ResponseWriter, r *http.Request, _ *reqInfo) {
	_, perPage := paging(r)
	var cursor int64
	if c := r.URL.Query().Get("cursor"); c != "" {
		v, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, "Invalid cursor")
			return
		}
		cursor = v
	}
	s.mu.Lock()
	sorted := make([]HookDelivery, len(s.deliveries))
	for i, d := range s.deliveries {
		sorted[i] = *d
	}
	s.mu.Unlock()
	// Newest first, as GitHub lists them; the cursor is the id of the previous page's last item.
	sort.Slice(sorted, func(i, j int) bool {
		if !sorted[i].DeliveredAt.Equal(sorted[j].DeliveredAt) {
			return sorted[i].DeliveredAt.After(sorted[j].DeliveredAt)
		}
		return sorted[i].ID > sorted[j].ID
	})
	start := 0
	if cursor != 0 {
		for i, d := range sorted {
			if d.ID == cursor {
				start = i + 1
				break
			}
		}
	}
	end := min(start+perPage, len(sorted))
	page := sorted[start:end]
	more := end < len(sorted)
	if more {
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`,
			s.apiURL(r, "/app/hook/deliveries?per_page=%d&cursor=%d", perPage, page[len(page)-1].ID)))
	}
	if page == nil {
		page = []HookDelivery{}
	}
	writeJSON(w, http.StatusOK, page)
}

// redeliver: POST /app/hook/deliveries/{id}/attempts — sends the delivery again (same GUID).
func (s *Simulator) redeliver(w http.ResponseWriter, r *http.Request, _ *reqInfo) {
	id, _ := pathInt(r, "id")
	s.mu.Lock()
	var d *HookDelivery
	for _, c := range s.deliveries {
		if c.ID == id {
			d = c
			break
		}
	}
	s.mu.Unlock()
	if d == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if s.opts.WebhookURL != "" {
		guid, event, action, payload := d.GUID, d.Event, d.Action, d.payload
		s.webhooks.schedule(s.now(), func(ctx context.Context, p poster) { s.send(ctx, p, guid, event, action, payload, true) })
	}
	writeJSON(w, http.StatusAccepted, map[string]any{})
}

// webhookTimeout bounds one webhook request, as GitHub's 10 s and a margin.
const webhookTimeout = 15 * time.Second

// webhookQueue holds scheduled webhooks in a time-ordered heap and sends them from a fixed pool,
// so a large load schedules thousands of runs without a goroutine each.
type webhookQueue struct {
	sim    *Simulator
	mu     sync.Mutex
	items  eventHeap
	kick   chan struct{}
	work   chan func(context.Context, poster)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// event is a webhook due at a time: send delivers it (building its payload then, outside the
// caller's locks).
type event struct {
	at   time.Time
	send func(context.Context, poster)
}

type eventHeap []event

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newWebhookQueue(s *Simulator, senders int) *webhookQueue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &webhookQueue{sim: s, kick: make(chan struct{}, 1), work: make(chan func(context.Context, poster), 1024), ctx: ctx, cancel: cancel}
	client := &http.Client{Timeout: webhookTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	plain := strings.HasPrefix(s.opts.WebhookURL, "http://")
	q.wg.Add(1 + senders)
	go q.schedule0()
	for i := 0; i < senders; i++ {
		// Each sender its own connection to a plain http URL (hookconn.go).
		var p poster = clientPoster{client}
		if plain {
			p = newConnPoster(webhookTimeout)
		}
		go func() {
			defer q.wg.Done()
			if c, ok := p.(*connPoster); ok {
				defer c.close()
			}
			for {
				select {
				case <-ctx.Done():
					return
				case f := <-q.work:
					f(ctx, p)
				}
			}
		}()
	}
	return q
}

// schedule queues send for at. It never blocks on the senders, so an API handler can call it: GitHub
// answers a request without waiting for the webhooks it causes.
func (q *webhookQueue) schedule(at time.Time, send func(context.Context, poster)) {
	q.mu.Lock()
	heap.Push(&q.items, event{at: at, send: send})
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *webhookQueue) enqueue(f func(context.Context, poster)) {
	select {
	case q.work <- f:
	case <-q.ctx.Done():
	}
}

// schedule0 moves due events to the senders.
func (q *webhookQueue) schedule0() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		wait := time.Hour
		var due []event
		now := q.sim.now()
		for q.items.Len() > 0 && !q.items[0].at.After(now) {
			due = append(due, heap.Pop(&q.items).(event))
		}
		if q.items.Len() > 0 {
			wait = q.items[0].at.Sub(now)
		}
		q.mu.Unlock()
		for _, e := range due {
			q.enqueue(e.send)
		}
		select {
		case <-q.ctx.Done():
			return
		case <-q.kick:
		case <-time.After(wait):
		}
	}
}

// deliver sends one webhook; like a delivery that failed and is redelivered, a refused one (5xx,
// connection error) is retried a few times with backoff. It reports whether it was accepted.
func (s *Simulator) deliver(ctx context.Context, p poster, event, action string, payload []byte) bool {
	guid := newGUID()
	for attempt := 0; attempt < 5; attempt++ {
		code := s.send(ctx, p, guid, event, action, payload, attempt > 0)
		if code >= 200 && code < 300 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(200<<attempt) * time.Millisecond):
		}
	}
	return false
}

func (q *webhookQueue) close() {
	q.cancel()
	q.wg.Wait()
}
