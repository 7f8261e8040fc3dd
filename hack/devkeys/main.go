// Command devkeys writes a throw-away GitHub App key and webhook secret for the local run
// (never for production): DIR/app-key.pem and DIR/webhook-secret, mode 0600. Existing files are
// kept, so a local run keeps its identity across restarts.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/boardreadyops/cloud/pkg/testkit/githubsim"
)

func main() {
	dir := flag.String("dir", ".data/dev", "directory for app-key.pem and webhook-secret")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "devkeys:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keyPath, secretPath := filepath.Join(dir, "app-key.pem"), filepath.Join(dir, "webhook-secret")
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		key, _, err := githubsim.NewAppKey()
		if err != nil {
			return err
		}
		if err := os.WriteFile(keyPath, key, 0o600); err != nil {
			return err
		}
	}
	if _, err := os.Stat(secretPath); errors.Is(err, fs.ErrNotExist) {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		if err := os.WriteFile(secretPath, []byte(hex.EncodeToString(b[:])+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}
