package secrets_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/boardreadyops/cloud/services/ingest/internal/secrets"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"one", []string{"one"}},
		{"old\nnew\n", []string{"old", "new"}},
		{"  spaced  \r\n\n\nlast", []string{"spaced", "last"}},
		{"\n\n", nil},
	}
	for _, tt := range tests {
		got := secrets.Parse([]byte(tt.in))
		if len(got) != len(tt.want) {
			t.Fatalf("Parse(%q) = %q, want %q", tt.in, got, tt.want)
		}
		for i := range got {
			if string(got[i]) != tt.want[i] {
				t.Fatalf("Parse(%q) = %q, want %q", tt.in, got, tt.want)
			}
		}
	}
}

func TestLoadAndWatch(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secrets")
	if _, err := secrets.Load(path); err == nil {
		t.Fatal("missing file loaded")
	}
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Load(path); !errors.Is(err, secrets.ErrEmpty) {
		t.Fatalf("empty file: %v", err)
	}
	if err := os.WriteFile(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := secrets.Load(path)
	if err != nil || f.Count() != 1 {
		t.Fatalf("load: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errorsSeen atomic.Int64
	go f.Watch(ctx, 5*time.Millisecond, slog.New(slog.DiscardHandler), func() { errorsSeen.Add(1) })

	if err := os.WriteFile(path, []byte("first\nsecond\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.Count() == 2 })
	// An emptied file keeps the previous secrets and reports the error.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return errorsSeen.Load() > 0 })
	if f.Count() != 2 {
		t.Fatalf("emptied file dropped secrets: %d left", f.Count())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
