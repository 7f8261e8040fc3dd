// Package releasetag decides which tags start a release: the rule lifecycle applies to a tag push
// and brops release-runs create to an operator's tag, so that both always agree.
package releasetag

import (
	"fmt"
	"path"
)

// Check says why tag starts no release under the tag pattern and the excluded patterns (Go
// path.Match on the tag name, without refs/tags/): "" when it does. An invalid pattern is an
// error: no tag starts a release under it.
func Check(pattern string, excluded []string, tag string) (refusal string, err error) {
	ok, err := path.Match(pattern, tag)
	if err != nil {
		return "", fmt.Errorf("tag pattern %q is invalid: %w", pattern, err)
	}
	if !ok {
		return fmt.Sprintf("it does not match the tag pattern %q", pattern), nil
	}
	for _, x := range excluded {
		hit, err := path.Match(x, tag)
		if err != nil {
			return "", fmt.Errorf("excluded tag pattern %q is invalid: %w", x, err)
		}
		if hit {
			return fmt.Sprintf("it matches the excluded tag pattern %q", x), nil
		}
	}
	return "", nil
}
