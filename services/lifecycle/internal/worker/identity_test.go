package worker_test

import (
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/checkrun"
	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// A check_run rerequest maps its external_id to the release run in both forms: the key-derived
// identity (migration 00031) and the release run id that check runs created before carry. Only
// the run's own identity, on its repository and commit, re-runs it.
func TestRerequestExternalIDForms(t *testing.T) {
	t.Parallel()
	const ref = "refs/tags/v1.0.0"
	v2 := checkrun.ExternalID(repoID, ref)
	tests := []struct {
		name  string
		doc   func(run string) eventdoc.Document
		rerun bool
	}{
		{"v1: the release run id", func(run string) eventdoc.Document { return rerequest(run, 4001) }, true},
		{"v2: the release's identity", func(string) eventdoc.Document { return rerequest(v2, 4001) }, true},
		{"v2 of another tag", func(string) eventdoc.Document {
			return rerequest(checkrun.ExternalID(repoID, "refs/tags/v1.0.1"), 4001)
		}, false},
		{"v2 naming another repository", func(string) eventdoc.Document { return rerequest(checkrun.ExternalID(repoID+1, ref), 4001) }, false},
		{"v2 on another commit", func(string) eventdoc.Document {
			d := rerequest(v2, 4001)
			d.CheckRun.HeadSHA = strings.Repeat("a", 40)
			return d
		}, false},
		{"v2 with another check run id", func(string) eventdoc.Document { return rerequest(v2, 999) }, false},
		{"v2 in capitals", func(string) eventdoc.Document { return rerequest(strings.ToUpper(v2), 4001) }, false},
		{"v2 with a leading zero", func(string) eventdoc.Document { return rerequest(strings.Replace(v2, "v2:", "v2:0", 1), 4001) }, false},
		{"v2 with a trailing part", func(string) eventdoc.Document { return rerequest(v2+":x", 4001) }, false},
		{"v1 in capitals", func(run string) eventdoc.Document { return rerequest(strings.ToUpper(run), 4001) }, false},
		{"SQL in the external_id", func(string) eventdoc.Document { return rerequest("v2:1296269:' OR true --", 4001) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			run := b.succeededRun()
			job := b.deliver(tt.doc(run))
			b.drain()
			if b.jobStatus(job) != "completed" {
				t.Fatal("job not completed")
			}
			want := map[bool]int{true: 2, false: 1}[tt.rerun]
			if n := b.count(`SELECT count(*) FROM execution_attempts`); n != want {
				t.Fatalf("%d attempts, want %d", n, want)
			}
		})
	}
}

// The SQL function lifecycle's lookup uses computes the identity the dispatcher writes.
func TestExternalIDMatchesSQL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		repo int64
		ref  string
	}{
		{1296269, "refs/tags/v1.0.0"},
		{1, "refs/tags/版本-1"},
		{9223372036854775807, "refs/tags/" + strings.Repeat("x", 4000)},
		{42, ""},
	} {
		var got string
		if err := b.pool.QueryRow(b.ctx, `SELECT boardreadyops_release_run_external_id($1, $2)`, c.repo, c.ref).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := checkrun.ExternalID(c.repo, c.ref); got != want {
			t.Errorf("repository %d, ref of %d bytes: SQL %q, Go %q", c.repo, len(c.ref), got, want)
		}
	}
}

// The SQL lookup (boardreadyops_release_run_of_check_run) and the Go parser agree: for the run's
// two external_ids and their mutations, SQL finds the run exactly when ParseExternalID accepts
// the string and it is the run's identity.
func TestExternalIDLookupAgreesWithParser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(pushTag("v1.0.0", sha))
	b.drain()
	run := b.onlyRun()
	v2 := checkrun.ExternalID(repoID, "refs/tags/v1.0.0")
	var inputs []string
	for _, s := range []string{run, v2} {
		inputs = append(inputs, s, strings.ToUpper(s), s+"0", s[:len(s)-1], " "+s, s+"\n", strings.Replace(s, "-", "", 1),
			strings.Replace(s, ":", "::", 1), strings.Replace(s, "v2:", "v2:+", 1), strings.Replace(s, "v2:", "v2:0", 1))
	}
	inputs = append(inputs, "", "v2:", checkrun.ExternalID(repoID, "refs/tags/v1.0.1"), checkrun.ExternalID(repoID+1, "refs/tags/v1.0.0"))
	for _, s := range inputs {
		id, err := checkrun.ParseExternalID(s)
		want := err == nil && id.Of(run, repoID, "refs/tags/v1.0.0")
		var found *string
		if err := b.pool.QueryRow(b.ctx, `SELECT (boardreadyops_release_run_of_check_run($1, $2, $3)).id::text`, repoID, s, sha).Scan(&found); err != nil {
			t.Fatal(err)
		}
		if got := found != nil && *found == run; got != want || (found != nil && *found != run) {
			t.Errorf("%q: SQL found %v, parser says %v", s, found, want)
		}
	}
}
