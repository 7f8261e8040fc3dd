package store

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/hubsig"
	"github.com/boardreadyops/cloud/services/ingest/internal/webhook"
)

// The largest documents GitHub's installation events can make are stored: repository lists of
// 10,000 entries with full names of GitHub's longest (a 39-byte owner, a 100-byte name) and
// 19-digit ids, two of them in installation_repositories. Cut at 10,000 entries alone, such a
// document is 1.9 MB and the inbox's 1 MiB bound refused it on every redelivery; lists of
// ordinary names keep their 10,000 entries.
func TestLargestDocumentsAreStored(t *testing.T) {
	t.Parallel()
	s, pool := groupStore(t)
	ctx := context.Background()

	list := func(n, nameLen int) string {
		var b strings.Builder
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			name := fmt.Sprintf("r%d-", i)
			name += strings.Repeat("x", nameLen-len(name))
			fmt.Fprintf(&b, `{"id":%d,"full_name":"%s/%s"}`, 1_000_000_000_000_000_000+i, strings.Repeat("o", 39), name)
		}
		b.WriteByte(']')
		return b.String()
	}
	const account = `"installation":{"id":1,"app_id":1,"account":{"login":"octo-org","type":"Organization"},"repository_selection":"selected"},"sender":{"login":"octocat","type":"User"}`
	tests := []struct {
		name, event, body string
		wantEntries       int // in all lists together
		wantTruncated     bool
	}{
		{"installation created, longest names", "installation",
			`{"action":"created",` + account + `,"repositories":` + list(10_000, 100) + `}`, 0, true},
		{"installation_repositories, two lists of longest names", "installation_repositories",
			`{"action":"added",` + account + `,"repository_selection":"selected","repositories_added":` + list(10_000, 100) +
				`,"repositories_removed":` + list(10_000, 100) + `}`, 0, true},
		{"installation created, ordinary names", "installation",
			`{"action":"created",` + account + `,"repositories":` + list(10_000, 6) + `}`, 10_000, false},
	}
	secret := []byte("generated-test-secret")
	for i, tt := range tests {
		body := []byte(tt.body)
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("X-GitHub-Event", tt.event)
		h.Set("X-GitHub-Delivery", fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		h.Set("X-Hub-Signature-256", hubsig.Sign(secret, body))
		d, rej := webhook.Parse(h, body, [][]byte{secret}, webhook.ContentTypeJSON)
		if rej != nil {
			t.Fatalf("%s: refused %d %s", tt.name, rej.Status, rej.Message)
		}
		if _, err := s.Accept(ctx, d, ""); err != nil {
			t.Fatalf("%s: a %d-byte document was not stored: %v", tt.name, len(d.Document), err)
		}
		var entries int
		var truncated bool
		var size int
		if err := pool.QueryRow(ctx, `
			SELECT coalesce(jsonb_array_length(payload->'repositories'), 0) + coalesce(jsonb_array_length(payload->'repositories_added'), 0)
			       + coalesce(jsonb_array_length(payload->'repositories_removed'), 0),
			       coalesce((payload->>'repositories_truncated')::boolean, false), pg_column_size(payload)
			FROM webhook_inbox WHERE delivery_id = $1`, d.ID).Scan(&entries, &truncated, &size); err != nil {
			t.Fatal(err)
		}
		if truncated != tt.wantTruncated || (tt.wantEntries > 0 && entries != tt.wantEntries) || entries < 4_000 {
			t.Errorf("%s: %d entries stored, truncated %v; want %d (0: any above 4,000), truncated %v", tt.name, entries, truncated,
				tt.wantEntries, tt.wantTruncated)
		}
		t.Logf("%s: %d entries, %d bytes of JSON, %d bytes stored", tt.name, entries, len(d.Document), size)
	}
}
