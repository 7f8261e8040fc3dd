package schema_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/schema"
)

var (
	functionDefinition = regexp.MustCompile(`CREATE (OR REPLACE )?FUNCTION`)
	pinnedSearchPath   = regexp.MustCompile(`SET search_path (= pg_catalog, (public, )?pg_temp|TO 'pg_catalog', ('public', )?'pg_temp')`)
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
		// Every SECURITY DEFINER function pins its search_path: with public on it until migration
		// 00015, with pg_catalog and pg_temp only from 00016 on (TestPinnedSearchPaths in
		// pkg/migrate checks the live schema's functions themselves).
		for _, chunk := range functionDefinition.Split(s, -1)[1:] {
			end := strings.Index(chunk, "AS $")
			if end < 0 {
				continue // built by dynamic SQL (00014's wrappers); TestPinnedSearchPaths covers them
			}
			header := chunk[:end]
			if strings.Contains(header, "SECURITY DEFINER") && !pinnedSearchPath.MatchString(header) {
				t.Errorf("%s: SECURITY DEFINER function without pinned search_path: %.60s", f, chunk)
			}
		}
	}
}
