package secrets_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
	if err := os.WriteFile(path, []byte("first-generated-secret\n"), 0o600); err != nil {
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

	if err := os.WriteFile(path, []byte("first-generated-secret\nsecond-generated-secret\n"), 0o600); err != nil {
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

// A secret shorter than 16 bytes is refused at start with a message that says why (and never
// the secret), and a reload that brings one in keeps the previous secrets.
func TestShortSecretRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(path, []byte("long-enough-generated-secret\nfifteen-bytes!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := secrets.Load(path)
	if !errors.Is(err, secrets.ErrShort) || !strings.Contains(err.Error(), "secret 2 of 2 is 15 bytes, want at least 16") {
		t.Fatalf("load: %v", err)
	}
	if strings.Contains(err.Error(), "fifteen") || strings.Contains(err.Error(), "long-enough") {
		t.Fatalf("error echoes a secret: %v", err)
	}
	if err := os.WriteFile(path, []byte("sixteen-bytes!!!"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := secrets.Load(path)
	if err != nil {
		t.Fatalf("16-byte secret refused: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errorsSeen atomic.Int64
	go f.Watch(ctx, 5*time.Millisecond, slog.New(slog.DiscardHandler), func() { errorsSeen.Add(1) })
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return errorsSeen.Load() > 0 })
	if got := f.Secrets(); len(got) != 1 || string(got[0]) != "sixteen-bytes!!!" {
		t.Fatal("a short secret replaced the loaded one")
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
