package outbox_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/boardreadyops/cloud/pkg/groupcommit"
	"github.com/boardreadyops/cloud/pkg/outbox"
)

// effectsOf enqueues n check-run creations (one release run each) for installation inst.
func effectsOf(t *testing.T, ctx context.Context, b *bundle, inst int64, n int) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		r := run{InstallationID: inst, RepositoryID: randomID()}
		if _, err := b.pool.Exec(ctx, `INSERT INTO installations (id, account_login, account_type) VALUES ($1, 'octo-org', 'Organization')
			ON CONFLICT DO NOTHING`, inst); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `INSERT INTO repositories (id, installation_id, full_name) VALUES ($1, $2, $3)`,
			r.RepositoryID, inst, fmt.Sprintf("octo-org/repo-%d", r.RepositoryID)); err != nil {
			t.Fatal(err)
		}
		if err := b.pool.QueryRow(ctx, `INSERT INTO release_runs (repository_id, installation_id, ref, head_sha, workflow_file, status)
			VALUES ($1, $2, 'refs/tags/v1.0.0', repeat('a', 40), 'boardreadyops-release.yml', 'check_pending') RETURNING id::text`,
			r.RepositoryID, inst).Scan(&r.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, enqueueCreate(t, ctx, b, r))
	}
	return ids
}

// knownInstallations makes n installations with one due check-run creation each, and their pacing
// rows, as an earlier claim made them in a busy deployment.
func knownInstallations(t *testing.T, ctx context.Context, b *bundle, n int) []int64 {
	t.Helper()
	insts := make([]int64, n)
	for i := range insts {
		insts[i] = randomID()
		effectsOf(t, ctx, b, insts[i], 1)
	}
	if _, err := b.pool.Exec(ctx, `INSERT INTO github_installation_limits (installation_id, updated_at)
		SELECT unnest($1::bigint[]), now()`, insts); err != nil {
		t.Fatal(err)
	}
	return insts
}

func countBy(effects []outbox.Effect) map[int64]int {
	out := map[int64]int{}
	for _, e := range effects {
		out[e.InstallationID]++
	}
	return out
}

func release(t *testing.T, ctx context.Context, b *bundle, interval time.Duration, installations ...int64) {
	t.Helper()
	errs := groupcommit.New(b.pool, nil, 10, 10*time.Second).CommitTogether(func(batch *groupcommit.Batch, report func(error)) {
		for _, inst := range installations {
			b.store.QueueRelease(batch, inst, interval, report)
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestBlockedInstallationIsNotClaimed(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	limited, other := randomID(), randomID()
	effectsOf(t, ctx, b, limited, 3)
	end, err := b.store.Block(ctx, b.pool, limited, b.clock.Now().Add(90*time.Second), time.Minute, 15*time.Minute)
	if err != nil || !end.Equal(b.clock.Now().Add(90*time.Second)) {
		t.Fatalf("block: %v %v", end, err)
	}
	late := effectsOf(t, ctx, b, limited, 1) // enqueued during the block: due, still not claimed
	effectsOf(t, ctx, b, other, 2)
	for i, pace := range []outbox.Pace{{}, {PerInstallation: 8}} {
		got, err := b.store.ClaimPaced(ctx, b.pool, fmt.Sprintf("w-%d", i), 100, time.Minute, pace)
		if err != nil {
			t.Fatal(err)
		}
		if n := countBy(got); n[limited] != 0 || (i == 0 && n[other] != 2) {
			t.Fatalf("pace %+v: claimed %v during the block", pace, n)
		}
	}
	if n := count(t, ctx, b, `SELECT count(*) FROM control_plane_outbox WHERE installation_id = $1 AND attempts > 0`, limited); n != 0 {
		t.Fatalf("%d effects of the blocked installation spent an attempt", n)
	}
	b.clock.Advance(91 * time.Second)
	got, err := b.store.Claim(ctx, b.pool, "w-after", 100, time.Minute)
	if err != nil || countBy(got)[limited] != 4 {
		t.Fatalf("after the block: %v %v (late effect %d)", countBy(got), err, late[0])
	}
}

func count(t *testing.T, ctx context.Context, b *bundle, q string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Without a time from GitHub the block backs off exponentially from its base, capped, with
// jitter that only lengthens it, and starts again from the base once the installation went a cap without a limit.
func TestBlockBacksOffExponentially(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	inst := randomID()
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute} {
		now := b.clock.Now()
		end, err := b.store.Block(ctx, b.pool, inst, time.Time{}, time.Minute, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// Never shorter than the backoff: GitHub asks for at least a minute (00070).
		if got := end.Sub(now); got < want || got > want*12/10 {
			t.Fatalf("limit %d: blocked %v, want %v to 20 %% more", i+1, got, want)
		}
		b.clock.Advance(end.Sub(now)) // the next limit right after the block ends
	}
	b.clock.Advance(11 * time.Minute)
	now := b.clock.Now()
	end, err := b.store.Block(ctx, b.pool, inst, time.Time{}, time.Minute, 10*time.Minute)
	if err != nil || end.Sub(now) < time.Minute || end.Sub(now) > 72*time.Second {
		t.Fatalf("after a quiet cap: blocked %v (%v), want the base again", end.Sub(now), err)
	}
	// A block never shortens one in force.
	if end2, err := b.store.Block(ctx, b.pool, inst, now.Add(time.Second), time.Minute, 10*time.Minute); err != nil || !end2.Equal(end) {
		t.Fatalf("shorter block: %v %v, want %v kept", end2, err, end)
	}
}

// Paced: one effect per installation per claim, none while it is in flight, and the next only
// the interval after its release.
func TestPacedClaim(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	busy, quiet := randomID(), randomID()
	effectsOf(t, ctx, b, busy, 5)
	effectsOf(t, ctx, b, quiet, 1)
	pace := outbox.Pace{PerInstallation: 1, MutationInterval: time.Second}
	claim := func(worker string) map[int64]int {
		t.Helper()
		got, err := b.store.ClaimPaced(ctx, b.pool, worker, 10, time.Minute, pace)
		if err != nil {
			t.Fatal(err)
		}
		return countBy(got)
	}
	if n := claim("w1"); n[busy] != 1 || n[quiet] != 1 {
		t.Fatalf("first claim %v, want one of each installation", n)
	}
	b.clock.Advance(5 * time.Second) // in flight: no second delivery, however long it takes
	if n := claim("w2"); len(n) != 0 {
		t.Fatalf("claimed %v while the busy installation's delivery is in flight", n)
	}
	release(t, ctx, b, time.Second, busy)
	b.clock.Advance(900 * time.Millisecond)
	if n := claim("w2"); len(n) != 0 {
		t.Fatalf("claimed %v sooner than the interval after the release", n)
	}
	b.clock.Advance(100 * time.Millisecond)
	if n := claim("w2"); n[busy] != 1 || len(n) != 1 {
		t.Fatalf("claim after the interval %v, want one of the busy installation", n)
	}
	// A replica that died holds the installation only until its claim's lease ends.
	b.clock.Advance(61 * time.Second)
	if n := claim("w3"); n[busy] != 1 {
		t.Fatalf("claim after the lease of an unreleased delivery %v", n)
	}
	st, err := b.store.LimitStats(ctx, b.pool, 1)
	if err != nil || st.Paced != 1 || st.Blocked != 0 || st.LowestRemainingFraction != nil {
		t.Fatalf("stats %+v %v, want the busy installation paced (the quiet one's lease ended)", st, err)
	}
	// Without an interval, up to PerInstallation at once.
	pace = outbox.Pace{PerInstallation: 2}
	b.clock.Advance(2 * time.Minute)
	if n := claim("w4"); n[busy] != 2 {
		t.Fatalf("claim without interval %v, want 2 of the busy installation", n)
	}
}

func TestRecordBudgets(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	spent, fine := randomID(), randomID()
	effectsOf(t, ctx, b, spent, 1)
	reset := b.clock.Now().Add(20 * time.Minute).Truncate(time.Second)
	if err := b.store.RecordBudgets(ctx, b.pool, []outbox.Budget{
		{InstallationID: spent, Limit: 5000, Remaining: 0, Reset: reset},
		{InstallationID: fine, Limit: 5000, Remaining: 4000, Reset: reset},
	}); err != nil {
		t.Fatal(err)
	}
	st, err := b.store.LimitStats(ctx, b.pool, 1)
	if err != nil || st.Blocked != 1 || st.LowestRemainingFraction == nil || *st.LowestRemainingFraction != 0 {
		t.Fatalf("stats %+v %v", st, err)
	}
	if got, err := b.store.Claim(ctx, b.pool, "w", 10, time.Minute); err != nil || len(got) != 0 {
		t.Fatalf("claimed %d effects of an installation without budget (%v)", len(got), err)
	}
	b.clock.Advance(21 * time.Minute)
	if got, err := b.store.Claim(ctx, b.pool, "w", 10, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("after the reset: %d effects (%v)", len(got), err)
	}
}

// A paced claim of limit effects locks the rows of at most limit installations, not of every
// installation among its candidates (00034): the others stay free for another replica's claim
// while this one's transaction is open.
func TestPacedClaimLocksOnlyTheInstallationsItUses(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	const installations, limit = 6, 2
	insts := knownInstallations(t, ctx, b, installations)
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	got, err := b.store.ClaimPaced(ctx, tx, "w1", limit, time.Minute, outbox.Pace{PerInstallation: 1, MutationInterval: time.Second})
	if err != nil || len(got) != limit {
		t.Fatalf("claimed %d effects (%v), want %d", len(got), err, limit)
	}
	free := count(t, ctx, b, `SELECT count(*) FROM (SELECT 1 FROM github_installation_limits
		WHERE installation_id = ANY($1) FOR UPDATE SKIP LOCKED) l`, insts)
	if free != installations-limit {
		t.Fatalf("%d of %d installation rows free while the claim of %d is open, want %d", free, installations, limit, installations-limit)
	}
}

// A paced claim waits for no open transaction that updated the pacing row of one of its
// candidate installations (00064): another replica's claim, a release batch or a budget record.
// It claims around that installation, whose row the gate skips while it is locked.
func TestPacedClaimWaitsForNoOpenTransaction(t *testing.T) {
	t.Parallel()
	pace := outbox.Pace{PerInstallation: 2, MutationInterval: 0}
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, b *bundle, tx pgx.Tx, inst int64) error
	}{
		{"claim", func(ctx context.Context, b *bundle, tx pgx.Tx, inst int64) error {
			got, err := b.store.ClaimPaced(ctx, tx, "w1", 1, time.Minute, pace)
			if err == nil && (len(got) != 1 || got[0].InstallationID != inst) {
				err = fmt.Errorf("claimed %v, want one effect of installation %d", got, inst)
			}
			return err
		}},
		{"release", func(ctx context.Context, b *bundle, tx pgx.Tx, inst int64) error {
			_, err := tx.Exec(ctx, `SELECT boardreadyops_outbox_release_installation_batch(ARRAY[$1::bigint], interval '1 second')`, inst)
			return err
		}},
		{"budget", func(ctx context.Context, b *bundle, tx pgx.Tx, inst int64) error {
			return b.store.RecordBudgets(ctx, tx, []outbox.Budget{{InstallationID: inst, Limit: 5000, Remaining: 4000, Reset: time.Now().Add(time.Hour)}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, b := setup(t)
			first, second := randomID(), randomID()
			effectsOf(t, ctx, b, first, 2)
			effectsOf(t, ctx, b, second, 1)
			if _, err := b.pool.Exec(ctx, `INSERT INTO github_installation_limits (installation_id, updated_at)
				SELECT unnest($1::bigint[]), now()`, []int64{first, second}); err != nil {
				t.Fatal(err)
			}
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := tc.open(ctx, b, tx, first); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			got, err := b.store.ClaimPaced(wctx, b.pool, "w2", 3, time.Minute, pace)
			if err != nil || len(got) != 1 || got[0].InstallationID != second {
				t.Fatalf("claim: %v, %v; want the effect of installation %d, without waiting for the open %s", got, err, second, tc.name)
			}
		})
	}
}

// A paced claim beside another claim's open transaction passes over the installations that one
// holds and takes a whole batch of the next ones (00064), instead of coming back empty while the
// queue is full.
func TestPacedClaimBesideAnotherTakesTheNextInstallations(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	const installations, limit = 6, 2
	knownInstallations(t, ctx, b, installations)
	pace := outbox.Pace{PerInstallation: 1, MutationInterval: time.Second}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	first, err := b.store.ClaimPaced(ctx, tx, "w1", limit, time.Minute, pace)
	if err != nil || len(first) != limit {
		t.Fatalf("first claim: %d effects (%v), want %d", len(first), err, limit)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	second, err := b.store.ClaimPaced(wctx, b.pool, "w2", limit, time.Minute, pace)
	if err != nil || len(second) != limit {
		t.Fatalf("second claim: %d effects (%v), want %d beside the open first claim", len(second), err, limit)
	}
	held := countBy(first)
	for _, e := range second {
		if held[e.InstallationID] > 0 {
			t.Fatalf("second claim took installation %d, which the open first claim holds", e.InstallationID)
		}
	}
}

// The rate-limit runbook's SQL to lift a block (docs/operations.md, "Runbook: GitHub
// installations rate limited"), run as written: the block ends, only the effects the block
// deferred become due (one retrying past the block keeps its time), and the backoff level stays,
// so a repeated limit blocks longer than the last.
func TestRunbookLiftsABlock(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	inst := randomID()
	ids := effectsOf(t, ctx, b, inst, 3)
	retrying := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Microsecond)
	if _, err := b.pool.Exec(ctx, `UPDATE control_plane_outbox SET available_at = $2 WHERE id = $1`, ids[2], retrying); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b.clock.Set(now)
	if _, err := b.store.Block(ctx, b.pool, inst, time.Time{}, time.Minute, 16*time.Minute); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	at := strings.Index(text, "lift one")
	if at < 0 {
		t.Fatal("the runbook no longer says how to lift one block")
	}
	start := strings.Index(text[at:], "```sql\n")
	end := strings.Index(text[at+start+7:], "```")
	if start < 0 || end < 0 {
		t.Fatal("no SQL block after the runbook's \"lift one\"")
	}
	sql := strings.ReplaceAll(text[at+start+7:at+start+7+end], "= N", fmt.Sprintf("= %d", inst))
	if _, err := b.pool.Exec(ctx, sql); err != nil {
		t.Fatalf("the runbook's SQL: %v\n%s", err, sql)
	}
	var due int
	var kept time.Time
	var blockedUntil time.Time
	var level int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE available_at <= now()), max(available_at) FILTER (WHERE id = $2),
		(SELECT blocked_until FROM github_installation_limits WHERE installation_id = $1),
		(SELECT backoff_level FROM github_installation_limits WHERE installation_id = $1)
		FROM control_plane_outbox WHERE installation_id = $1`, inst, ids[2]).Scan(&due, &kept, &blockedUntil, &level); err != nil {
		t.Fatal(err)
	}
	if due != 2 || !kept.Equal(retrying) || blockedUntil.After(time.Now()) || level != 1 {
		t.Fatalf("after lifting: %d due (want the 2 deferred), the retrying one at %v (want %v), blocked until %v, level %d (want 1)",
			due, kept, retrying, blockedUntil, level)
	}
	b.clock.Set(time.Now())
	end2, err := b.store.Block(ctx, b.pool, inst, time.Time{}, time.Minute, 16*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := end2.Sub(b.clock.Now()); d < 2*time.Minute {
		t.Fatalf("a limit right after the lift blocked %v, want the next level's 2 minutes or more", d)
	}
}
