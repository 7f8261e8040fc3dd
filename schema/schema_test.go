package schema_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/schema"
)

func TestVersionsAreDenseAndGooseFormatted(t *testing.T) {
	t.Parallel()
	versions, err := schema.Versions()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range versions {
		if v != int64(i+1) {
			t.Fatalf("versions %v are not 1..n", versions)
		}
	}
	if schema.ExpectedVersion() != versions[len(versions)-1] {
		t.Fatal("expected version is not the newest migration")
	}
	files, _ := fs.Glob(schema.Migrations(), "*.sql")
	for _, f := range files {
		b, _ := fs.ReadFile(schema.Migrations(), f)
		s := string(b)
		if !strings.Contains(s, "-- +goose Up") || !strings.Contains(s, "-- +goose Down") {
			t.Errorf("%s lacks goose Up/Down markers", f)
		}
		if strings.Count(s, "-- +goose StatementBegin") != strings.Count(s, "-- +goose StatementEnd") {
			t.Errorf("%s has unbalanced StatementBegin/End", f)
		}
		// Every SECURITY DEFINER function pins its search_path.
		for _, chunk := range strings.Split(s, "CREATE FUNCTION")[1:] {
			end := strings.Index(chunk, "AS $$")
			if end < 0 {
				t.Errorf("%s: function without an AS $$ body: %.60s", f, chunk)
				continue
			}
			header := chunk[:end]
			if strings.Contains(header, "SECURITY DEFINER") && !strings.Contains(header, "SET search_path = pg_catalog, public, pg_temp") {
				t.Errorf("%s: SECURITY DEFINER function without pinned search_path: %.60s", f, chunk)
			}
		}
	}
}
