package main

import (
	"bytes"
	"testing"

	"github.com/boardreadyops/cloud/pkg/eventdoc"
)

// Every delivery of a mix is one ingest accepts (it normalizes), holds the delivery mark once,
// and is dropped by the filter except the two that matter in an organisation's release: the tag
// push and the dispatched run's completion.
func TestMixes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mix           string
		size, matters int
	}{
		{"release-tags", 1, 1},
		{"organisation", 150, 2},
		{"organisation-without-checks", 76, 2},
	}
	for _, tt := range tests {
		deliveries := mixes[tt.mix]()
		kept := 0
		for i, d := range deliveries {
			if n := bytes.Count(d.body, []byte(deliveryMark)); n != 1 {
				t.Fatalf("%s #%d (%s): the delivery mark %d times", tt.mix, i, d.event, n)
			}
			doc, err := eventdoc.Normalize(d.event, bytes.Replace(d.body, []byte(deliveryMark), []byte("d-1"), 1))
			if err != nil {
				t.Fatalf("%s #%d (%s): %v", tt.mix, i, d.event, err)
			}
			if _, filtered := eventdoc.Filter(&doc); !filtered {
				kept++
			}
		}
		if len(deliveries) != tt.size || kept != tt.matters {
			t.Errorf("%s: %d deliveries, %d kept by the filter; want %d and %d", tt.mix, len(deliveries), kept, tt.size, tt.matters)
		}
	}
}
