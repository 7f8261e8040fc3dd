package githubsim

// Finished check runs and workflow runs are kept for as long as the simulator runs, as GitHub
// keeps them. A soak of millions of release runs would then hold gigabytes (about 7 KiB per
// release run: the check run with its page of output, the workflow run), and the cost of that
// heap — the collector's work, fresh pages from the kernel — would be measured on the shared cores
// as if it were the product's. Options.RetainFinished bounds it: the oldest finished ones beyond
// that number are forgotten, as if they had aged out of GitHub's API. A run or check run that is
// not finished is never forgotten, and one that changed again after finishing counts from its last
// finish.

// finished is a check run's or workflow run's place in the order of finishing.
type finished struct {
	id, seq int64
}

// finishedCheckRunLocked records that c is completed (s.mu held) and forgets the oldest finished
// check runs beyond Options.RetainFinished.
func (s *Simulator) finishedCheckRunLocked(c *CheckRun) {
	if s.opts.RetainFinished <= 0 || c.Status != "completed" {
		return
	}
	s.finishSeq++
	c.finishedSeq = s.finishSeq
	s.finishedCheckRuns = append(s.finishedCheckRuns, finished{c.ID, c.finishedSeq})
	for len(s.finishedCheckRuns) > s.opts.RetainFinished {
		f := s.finishedCheckRuns[0]
		s.finishedCheckRuns = s.finishedCheckRuns[1:]
		old := s.checkRuns[f.id]
		if old == nil || old.Status != "completed" || old.finishedSeq != f.seq {
			continue // changed since, or finished again later: counted from then
		}
		delete(s.checkRuns, f.id)
		key := old.repo + "@" + old.HeadSHA
		kept := s.checkRunsAt[key][:0]
		for _, other := range s.checkRunsAt[key] {
			if other.ID != f.id {
				kept = append(kept, other)
			}
		}
		if len(kept) == 0 {
			delete(s.checkRunsAt, key)
		} else {
			s.checkRunsAt[key] = kept
		}
	}
}

// finishedRunLocked records that run is completed (s.mu held) and forgets the oldest finished
// workflow runs beyond Options.RetainFinished. The count of dispatches per attempt stays: it is
// what tests check "dispatched exactly once" against.
func (s *Simulator) finishedRunLocked(run *WorkflowRun) {
	if s.opts.RetainFinished <= 0 || run.Status != "completed" {
		return
	}
	s.finishSeq++
	run.finishedSeq = s.finishSeq
	s.finishedRuns = append(s.finishedRuns, finished{run.ID, run.finishedSeq})
	for len(s.finishedRuns) > s.opts.RetainFinished {
		f := s.finishedRuns[0]
		s.finishedRuns = s.finishedRuns[1:]
		if old := s.runs[f.id]; old != nil && old.Status == "completed" && old.finishedSeq == f.seq {
			delete(s.runs, f.id)
		}
	}
}
