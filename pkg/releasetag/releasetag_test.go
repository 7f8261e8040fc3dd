package releasetag_test

import (
	"strings"
	"testing"

	"github.com/boardreadyops/cloud/pkg/releasetag"
)

// The release rule for a tag: path.Match of the pattern on the tag name, then of each excluded
// pattern; an invalid pattern is an error.
func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern  string
		excluded []string
		tag      string
		want     string // "" when the tag starts a release
		wantErr  string
	}{
		{"v*", nil, "v1.4.2", "", ""},
		{"v*", nil, "nightly-1", `does not match the tag pattern "v*"`, ""},
		{"v*", nil, "release/v1", `does not match`, ""}, // path.Match: * does not cross a slash
		{"v*", []string{"*-rc*"}, "v2.0.0-rc1", `matches the excluded tag pattern "*-rc*"`, ""},
		{"v*", []string{"*-beta", "*-rc*"}, "v2.0.0", "", ""},
		{"release-[0-9]*", nil, "release-7", "", ""},
		{"v[", nil, "v1", "", `tag pattern "v[" is invalid`},
		{"v*", []string{"v["}, "v1", "", `excluded tag pattern "v[" is invalid`},
	}
	for _, tt := range tests {
		got, err := releasetag.Check(tt.pattern, tt.excluded, tt.tag)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Check(%q, %q, %q): error %v, want %q", tt.pattern, tt.excluded, tt.tag, err, tt.wantErr)
			}
			continue
		}
		if err != nil || (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("Check(%q, %q, %q) = %q, %v; want %q", tt.pattern, tt.excluded, tt.tag, got, err, tt.want)
		}
	}
}
