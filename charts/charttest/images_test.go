package charttest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var repoRoot = filepath.Join("..", "..")

// TestDockerfiles checks, without a container engine, that every image the chart references has
// a Dockerfile that builds a static binary onto distroless as non-root, and that every path it
// copies exists in the repository (the build context is the repository root).
func TestDockerfiles(t *testing.T) {
	t.Parallel()
	images := map[string]bool{}
	for _, file := range valueSets(t) {
		for _, pod := range podSpecs(renderObjects(t, file, "boardreadyops")) {
			for _, c := range pod.Spec.Containers {
				name := filepath.Base(c.Image)
				images[name[:strings.LastIndex(name, ":")]] = true
			}
		}
	}
	if len(images) != 5 {
		t.Fatalf("images referenced by the chart: %v, want the four services and brops", images)
	}
	copySrc := regexp.MustCompile(`(?m)^COPY (?:--[^ ]+ )*(.+) \S+$`)
	for image := range images {
		t.Run(image, func(t *testing.T) {
			t.Parallel()
			df := string(readFile(t, filepath.Join(repoRoot, "services", image, "Dockerfile")))
			for _, want := range []string{
				"CGO_ENABLED=0",
				"FROM gcr.io/distroless/static-debian12:nonroot",
				"USER 65532:65532",
				`ENTRYPOINT ["/usr/local/bin/` + image + `"]`,
				"go build",
			} {
				if !strings.Contains(df, want) {
					t.Errorf("Dockerfile lacks %q", want)
				}
			}
			for _, m := range copySrc.FindAllStringSubmatch(df, -1) {
				if strings.Contains(m[0], "--from=") {
					continue
				}
				for _, src := range strings.Fields(m[1]) {
					if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
						t.Errorf("COPY source %s: %v", src, err)
					}
				}
			}
		})
	}
}
