// Package secrets loads the webhook secrets file (BOARDREADYOPS_WEBHOOK_SECRET_FILE): one secret
// per line, so a secret rotates without downtime — add the new one, switch GitHub to it, remove
// the old one. The file is re-read periodically; a mounted Kubernetes Secret changes in place.
package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ErrEmpty means the file holds no secret; refusing every delivery is better than accepting
// unsigned ones, so loading fails.
var ErrEmpty = errors.New("webhook secret file holds no secret")

// MinLength is the shortest secret accepted, in bytes. A short secret can be found by trying
// candidates against one captured delivery offline; GitHub suggests a long random string.
const MinLength = 16

// ErrShort means a secret in the file is shorter than MinLength.
var ErrShort = errors.New("webhook secret too short")

// File is a reloadable secrets file. Secrets are never logged.
type File struct {
	path string
	mu   sync.RWMutex
	raw  []byte
	list [][]byte
}

// Load reads path; it fails when the file is unreadable, holds no secret, or holds one shorter
// than MinLength (a reload that finds one keeps the previous secrets).
func Load(path string) (*File, error) {
	f := &File{path: path}
	if _, err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Secrets returns the current secrets. The slice must not be modified.
func (f *File) Secrets() [][]byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.list
}

// Count is the number of secrets loaded.
func (f *File) Count() int { return len(f.Secrets()) }

// Watch re-reads the file every interval until ctx ends. A failed or empty read keeps the
// previous secrets and is reported through onError (never with the file's content).
func (f *File) Watch(ctx context.Context, interval time.Duration, logger *slog.Logger, onError func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := f.reload()
		if err != nil {
			logger.Warn("webhook secrets not reloaded; keeping the previous ones", "path", f.path, "error", err)
			if onError != nil {
				onError()
			}
			continue
		}
		if changed {
			logger.Info("webhook secrets reloaded", "path", f.path, "count", f.Count())
		}
	}
}

func (f *File) reload() (bool, error) {
	raw, err := os.ReadFile(f.path)
	if err != nil {
		return false, fmt.Errorf("read webhook secret file: %w", err)
	}
	f.mu.RLock()
	same := bytes.Equal(raw, f.raw)
	f.mu.RUnlock()
	if same {
		return false, nil
	}
	list := Parse(raw)
	if len(list) == 0 {
		return false, fmt.Errorf("%s: %w", f.path, ErrEmpty)
	}
	for i, secret := range list {
		if len(secret) < MinLength {
			return false, fmt.Errorf("%s: %w: secret %d of %d is %d bytes, want at least %d (for example: openssl rand -hex 32)",
				f.path, ErrShort, i+1, len(list), len(secret), MinLength)
		}
	}
	f.mu.Lock()
	f.raw, f.list = raw, list
	f.mu.Unlock()
	return true, nil
}

// Parse splits a secrets file into secrets: one per line, surrounding whitespace (and a CR)
// trimmed, empty lines skipped.
func Parse(raw []byte) [][]byte {
	var out [][]byte
	for _, line := range bytes.Split(raw, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			out = append(out, bytes.Clone(line))
		}
	}
	return out
}
