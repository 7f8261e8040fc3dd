// Package trigger evaluates the external-broker transition triggers (docs/operator.md): a
// signal that stays above its threshold for a whole window fires the trigger; a fired trigger
// clears only after the signal stayed below a hysteresis band for the clear window. It is pure:
// observations in, state out, no clock and no I/O, so every rule is testable over synthetic
// series.
package trigger

import "time"

// Observation is one evaluation of a signal over the interval [Start, End]. Valid is false when
// the signal could not be computed (scrape failure, no sample to diff against, no claims) or
// would not measure the load (for the age trigger, unhealthy workers; for the throughput trigger,
// a rate at or below its threshold with unhealthy workers); an invalid observation restarts any
// pending window, so a gap in the data can never complete a window, and it never clears a fired
// trigger either.
type Observation struct {
	Start, End time.Time
	Value      float64
	Valid      bool
}

// Config is one trigger's rule.
type Config struct {
	// Threshold: the signal counts towards firing while strictly above it.
	Threshold float64
	// Window: how long the signal must stay above Threshold, without a gap, before firing.
	Window time.Duration
	// HysteresisPercent and ClearWindow: a fired trigger clears once the signal has stayed at or
	// below Threshold × (100 − HysteresisPercent) / 100 for ClearWindow.
	HysteresisPercent int
	ClearWindow       time.Duration
}

// clearLevel is the value at or below which a fired trigger's signal counts towards clearing.
func (c Config) clearLevel() float64 {
	return c.Threshold * float64(100-c.HysteresisPercent) / 100
}

// State is one trigger's evaluation state; the zero value is an inactive trigger with no pending
// window.
type State struct {
	// Active is true while the trigger is fired.
	Active bool
	// Since is when Active last changed (zero until the first transition).
	Since time.Time
	// AboveSince is the start of the current unbroken run of above-threshold observations.
	AboveSince time.Time
	// BelowSince is the start of the current unbroken run of observations below the clear level.
	BelowSince time.Time
	// Last is the latest valid observation's value, for reporting.
	Last float64
	// LastValid tells whether the latest observation was valid.
	LastValid bool
}

// Transition tells what an observation changed.
type Transition int

const (
	// Unchanged: the trigger stayed as it was.
	Unchanged Transition = iota
	// Fired: the trigger became active.
	Fired
	// Cleared: the trigger became inactive.
	Cleared
)

// Observe folds one observation into s and reports whether the trigger fired or cleared.
func (s *State) Observe(c Config, o Observation) Transition {
	s.LastValid = o.Valid
	if !o.Valid {
		s.AboveSince, s.BelowSince = time.Time{}, time.Time{}
		return Unchanged
	}
	s.Last = o.Value
	if o.Value > c.Threshold {
		s.BelowSince = time.Time{}
		if s.AboveSince.IsZero() {
			s.AboveSince = o.Start
		}
		if !s.Active && o.End.Sub(s.AboveSince) >= c.Window {
			s.Active, s.Since = true, o.End
			return Fired
		}
		return Unchanged
	}
	s.AboveSince = time.Time{}
	if !s.Active {
		return Unchanged
	}
	if o.Value > c.clearLevel() {
		s.BelowSince = time.Time{}
		return Unchanged
	}
	if s.BelowSince.IsZero() {
		s.BelowSince = o.Start
	}
	if o.End.Sub(s.BelowSince) >= c.ClearWindow {
		s.Active, s.Since = false, o.End
		s.BelowSince = time.Time{}
		return Cleared
	}
	return Unchanged
}
