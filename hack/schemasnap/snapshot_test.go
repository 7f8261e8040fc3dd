package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestCommittedSnapshotIsCurrent generates the snapshot twice, from two scratch clusters, and
// expects the same files both times and the files committed under schema/current: a migration
// without `make generate` fails here as well as in `make verify-generate`.
func TestCommittedSnapshotIsCurrent(t *testing.T) {
	ctx := context.Background()
	first, err := snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "second run", second, first)

	committed := map[string]string{}
	root := filepath.Join("..", "..", "schema", "current")
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(root, path)
		committed[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "schema/current (run make generate)", committed, first)
}

func compare(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for _, name := range keys(want) {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: %s missing", what, name)
		} else if g != want[name] {
			t.Errorf("%s: %s differs at line %d", what, name, firstDifference(g, want[name]))
		}
	}
	for _, name := range keys(got) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s is not generated", what, name)
		}
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func firstDifference(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

// TestRouting puts every kind of section pg_dump writes next to the table or function it
// belongs to, joins a function's definition (named by types) with its grants (named with
// argument names), moves the old names to aliases.sql and fails on a section it cannot place.
func TestRouting(t *testing.T) {
	t.Parallel()
	dump := "--\n-- PostgreSQL database dump\n--\n\n\\restrict abc\n\n-- Dumped from database version 15.18\n-- Dumped by pg_dump version 15.18\n\nSET lock_timeout = 0;\n\n" +
		section("boardreadyops_job_claim(text)", "FUNCTION", "CREATE FUNCTION public.boardreadyops_job_claim(p_worker text) RETURNS void\n    LANGUAGE sql\n    AS $$SELECT 1$$;") +
		section("boardreadyops_claim_control_plane_jobs(text)", "FUNCTION", "CREATE FUNCTION public.boardreadyops_claim_control_plane_jobs(p_worker text) RETURNS void\n    LANGUAGE sql\n    AS $$SELECT * FROM public.boardreadyops_job_claim($1)$$;") +
		section("FUNCTION boardreadyops_claim_control_plane_jobs(p_worker text)", "COMMENT", "COMMENT ON FUNCTION public.boardreadyops_claim_control_plane_jobs(p_worker text) IS 'Deprecated name of boardreadyops_job_claim (migration 00014).';") +
		section("t", "TABLE", "CREATE TABLE public.t (\n    id bigint NOT NULL\n);") +
		section("t_id_seq", "SEQUENCE", "ALTER TABLE public.t ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (\n    SEQUENCE NAME public.t_id_seq\n);") +
		section("t t_pkey", "CONSTRAINT", "ALTER TABLE ONLY public.t\n    ADD CONSTRAINT t_pkey PRIMARY KEY (id);") +
		section("t_x_idx", "INDEX", "CREATE INDEX t_x_idx ON public.t USING btree (id);") +
		section("SCHEMA public", "ACL", "GRANT USAGE ON SCHEMA public TO r;") +
		section("FUNCTION boardreadyops_job_claim(p_worker text)", "ACL", "REVOKE ALL ON FUNCTION public.boardreadyops_job_claim(p_worker text) FROM PUBLIC;") +
		section("TABLE t", "ACL", "GRANT SELECT ON TABLE public.t TO r;") +
		"--\n-- PostgreSQL database dump complete\n--\n\n\\unrestrict abc\n"
	entries, err := splitDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := group(entries)
	if err != nil {
		t.Fatal(err)
	}
	files := render(objects, "-- header\n")
	want := map[string][]string{
		"functions/job.sql":     {"-- FUNCTION boardreadyops_job_claim(text)", "-- ACL FUNCTION boardreadyops_job_claim(p_worker text)"},
		"functions/aliases.sql": {"-- FUNCTION boardreadyops_claim_control_plane_jobs(text)", "-- COMMENT FUNCTION boardreadyops_claim_control_plane_jobs(p_worker text)"},
		"tables/t.sql":          {"-- TABLE t", "-- SEQUENCE t_id_seq", "-- CONSTRAINT t t_pkey", "-- INDEX t_x_idx", "-- ACL TABLE t"},
		"roles.sql":             {"-- ACL SCHEMA public"},
	}
	for name := range files {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected file %s:\n%s", name, files[name])
		}
	}
	for name, headers := range want {
		text := files[name]
		var got []string
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "-- ") && line != "-- header" {
				got = append(got, line)
			}
		}
		if strings.Join(got, "\n") != strings.Join(headers, "\n") {
			t.Errorf("%s sections:\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(headers, "\n"))
		}
		for _, volatile := range []string{"restrict", "Dumped", "SET lock_timeout", "dump complete"} {
			if strings.Contains(text, volatile) {
				t.Errorf("%s keeps %q", name, volatile)
			}
		}
	}

	if _, err := group([]entry{{name: "x", kind: "EVENT TRIGGER", body: "CREATE EVENT TRIGGER x"}}); err == nil {
		t.Error("a section of an unknown kind was placed somewhere")
	}
}

func section(name, kind, body string) string {
	return "--\n-- Name: " + name + "; Type: " + kind + "; Schema: public; Owner: -\n--\n\n" + body + "\n\n\n"
}

// TestWriteReplacesOnlyASnapshot: a stale file of a snapshot goes, a directory that is not a
// snapshot is left alone.
func TestWriteReplacesOnlyASnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{"README.md": readmeTitle + "\n", "tables/t.sql": "-- t\n"}
	if err := write(dir, files); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "tables", "dropped.sql")
	if err := os.WriteFile(stale, []byte("-- dropped\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := write(dir, files); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale file kept: %v", err)
	}

	other := t.TempDir()
	keep := filepath.Join(other, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := write(other, files); err == nil {
		t.Error("wrote over a directory that holds no snapshot")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("foreign file removed: %v", err)
	}
}
