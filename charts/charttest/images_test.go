package charttest

import (
	"path/filepath"
	"strings"
	"testing"
)

var repoRoot = filepath.Join("..", "..")

// TestImagesAreBuilt checks that every image the chart references is one that hack/images,
// the single image definition (make images), builds: `{name: "<image>", module: "services/<image>"`.
func TestImagesAreBuilt(t *testing.T) {
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
	def := string(readFile(t, filepath.Join(repoRoot, "hack", "images", "build.go")))
	for image := range images {
		if want := `{name: "` + image + `", module: "services/` + image + `"`; !strings.Contains(def, want) {
			t.Errorf("hack/images does not build %s (no %s)", image, want)
		}
	}
}
