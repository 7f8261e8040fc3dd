package queuerun

import (
	"math/rand/v2"
	"time"
)

// Backoff is capped exponential backoff with jitter: Base after the first attempt, then 2×Base,
// 4×Base, ... up to Max, each spread by ±Jitter so that items which failed together do not
// retry together.
type Backoff struct {
	// Base is the delay after the first attempt; it must be positive.
	Base time.Duration
	// Max caps the delay before jitter; it must be positive. The cap also applies when the
	// doubling overflows.
	Max time.Duration
	// Jitter is the spread as a fraction of the delay, from 0 (none) to 1: 0.2 gives 80 % to
	// 120 %.
	Jitter float64
	// Rand returns a number in [0, 1); nil means math/rand/v2's Float64.
	Rand func() float64
}

// Delay is the wait before the next attempt of an item that has made attempts attempts (the
// first attempt is 1; 0 and below count as 1).
func (b Backoff) Delay(attempts int) time.Duration {
	d := b.Base << min(max(attempts-1, 0), 20)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	r := rand.Float64
	if b.Rand != nil {
		r = b.Rand
	}
	return time.Duration(float64(d) * (1 - b.Jitter + 2*b.Jitter*r()))
}
