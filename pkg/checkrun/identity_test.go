package checkrun

import (
	"errors"
	"strings"
	"testing"
)

func TestExternalID(t *testing.T) {
	t.Parallel()
	long := "refs/tags/" + strings.Repeat("v", 5000)
	tests := []struct {
		name string
		repo int64
		ref  string
		want string
	}{
		// Written out (sha256sum of the ref, first 32 digits), so that a change of the form is seen:
		// check runs already on GitHub carry it.
		{"tag", 1296269, "refs/tags/v1.0.0", "v2:1296269:4ae92c749854a62efba1dfeb6604a290"},
		{"largest repository id", 9223372036854775807, "refs/tags/v1", "v2:9223372036854775807:" + RefDigest("refs/tags/v1")},
		{"long ref is bounded", 1, long, "v2:1:" + RefDigest(long)},
		{"non-ASCII ref", 7, "refs/tags/版本-1", "v2:7:" + RefDigest("refs/tags/版本-1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ExternalID(tt.repo, tt.ref)
			if got != tt.want || len(got) > MaxExternalIDLen {
				t.Fatalf("ExternalID = %q (%d characters), want %q within %d", got, len(got), tt.want, MaxExternalIDLen)
			}
			id, err := ParseExternalID(got)
			if err != nil || id.RepositoryID != tt.repo || !id.Of("", tt.repo, tt.ref) || id.String() != got {
				t.Fatalf("ParseExternalID(%q) = %+v, %v", got, id, err)
			}
			if id.Of("", tt.repo, tt.ref+"x") || id.Of("", tt.repo+1, tt.ref) {
				t.Fatalf("%+v matches another ref or repository", id)
			}
		})
	}
	if d := RefDigest("refs/tags/v1.0.0"); len(d) != 32 || d == RefDigest("refs/tags/v1.0.1") {
		t.Fatalf("digest %q", d)
	}
}

func TestParseExternalID(t *testing.T) {
	t.Parallel()
	digest := RefDigest("refs/tags/v1.0.0")
	tests := []struct {
		in   string
		want Identity
	}{
		{"v2:1296269:" + digest, Identity{RepositoryID: 1296269, RefDigest: digest}},
		{"3f0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b", Identity{ReleaseRunID: "3f0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b"}},
		{"", Identity{}},
		{"v2:", Identity{}},
		{"v2:1296269", Identity{}},
		{"v2:1296269:", Identity{}},
		{"v2::" + digest, Identity{}},
		{"v2:0:" + digest, Identity{}},
		{"v2:01296269:" + digest, Identity{}},
		{"v2:-5:" + digest, Identity{}},
		{"v2:+5:" + digest, Identity{}},
		{"v2:9223372036854775808:" + digest, Identity{}}, // beyond int64
		{"v2:1296269:" + strings.ToUpper(digest), Identity{}},
		{"v2:1296269:" + digest[:31], Identity{}},
		{"v2:1296269:" + digest + "0", Identity{}},
		{"v2:1296269:" + digest[:31] + "g", Identity{}},
		{"v2:1296269:" + digest + ":x", Identity{}},
		{"V2:1296269:" + digest, Identity{}},
		{"v3:1296269:" + digest, Identity{}},
		{"3F0C5B8E-2A1D-4E6F-9B7A-1C2D3E4F5A6B", Identity{}},
		{"3f0c5b8e2a1d4e6f9b7a1c2d3e4f5a6b", Identity{}},
		{"{3f0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b}", Identity{}},
		{"3f0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6", Identity{}},
		{"3f0c5b8e-2a1d-4e6f-9b7a_1c2d3e4f5a6b", Identity{}},
		{"run-1", Identity{}},
		{"v2:1296269:" + digest + "\x00", Identity{}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseExternalID(tt.in)
			if got != tt.want {
				t.Fatalf("ParseExternalID(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if (tt.want == Identity{}) != errors.Is(err, ErrExternalID) {
				t.Fatalf("ParseExternalID(%q) error %v", tt.in, err)
			}
			if err == nil && got.String() != tt.in {
				t.Fatalf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestIdentityOfEitherForm(t *testing.T) {
	t.Parallel()
	const run = "3f0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b"
	v1, _ := ParseExternalID(run)
	v2, _ := ParseExternalID(ExternalID(42, "refs/tags/v1"))
	tests := []struct {
		name string
		id   Identity
		run  string
		repo int64
		ref  string
		want bool
	}{
		{"v1, its run", v1, run, 42, "refs/tags/v1", true},
		{"v1, a recreated run", v1, "0a0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b", 42, "refs/tags/v1", false},
		{"v2, a recreated run of the same release", v2, "0a0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b", 42, "refs/tags/v1", true},
		{"v2, another tag", v2, run, 42, "refs/tags/v2", false},
		{"v2, another repository", v2, run, 43, "refs/tags/v1", false},
		{"zero", Identity{}, "", 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.id.Of(tt.run, tt.repo, tt.ref); got != tt.want {
				t.Fatalf("Of = %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzParseExternalID: the external_id of a check_run webhook is whatever a request claims. The
// parser never panics, accepts nothing longer than the bound, and whatever it accepts is
// canonical (it prints back as the same string), so two spellings never name one release run.
func FuzzParseExternalID(f *testing.F) {
	for _, s := range []string{ExternalID(1296269, "refs/tags/v1.0.0"), "3f0c5b8e-2a1d-4e6f-9b7a-1c2d3e4f5a6b", "v2:0:",
		"v2:9223372036854775807:" + RefDigest("x"), "v2:1:" + strings.Repeat("f", 32), ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseExternalID(s)
		if err != nil {
			if id != (Identity{}) || !errors.Is(err, ErrExternalID) {
				t.Fatalf("rejected %q with %+v, %v", s, id, err)
			}
			return
		}
		if len(s) > MaxExternalIDLen || id.String() != s {
			t.Fatalf("accepted %q as %+v (prints %q)", s, id, id.String())
		}
		if (id.ReleaseRunID == "") == (id.RepositoryID <= 0) {
			t.Fatalf("accepted %q as %+v: exactly one form expected", s, id)
		}
	})
}
