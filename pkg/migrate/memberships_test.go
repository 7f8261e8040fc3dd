package migrate_test

import (
	"context"
	"testing"
	"time"
)

// membershipsVersion is migration 00081, which orders a repository's membership per installation.
const membershipsVersion = 81

// TestMembershipsMigrationKeepsWhatWasApplied: 00081 keeps each repository's time from 00078 as its
// owner's membership, present or removed as the repository is, so the first change after the upgrade
// is ordered against it; a repository without a time gets no row.
func TestMembershipsMigrationKeepsWhatWasApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, conn := migratedTo(t, membershipsVersion-1)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, err := conn.Exec(ctx, `
		INSERT INTO installations (id, account_login, account_type) VALUES (7, 'octo-org', 'Organization');
		INSERT INTO repositories (id, installation_id, full_name, removed_at, membership_event_at) VALUES
			(1, 7, 'octo-org/present', NULL, '2026-12-01T10:00:00Z'),
			(2, 7, 'octo-org/removed', now(), '2026-12-01T10:00:00Z'),
			(3, 7, 'octo-org/no-time', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.UpTo(ctx, membershipsVersion); err != nil {
		t.Fatalf("00081: %v", err)
	}
	type row struct {
		repository, installation int64
		present, removed         *time.Time
	}
	rows, err := conn.Query(ctx, `SELECT repository_id, installation_id, present_event_at, removed_event_at
		FROM repository_memberships ORDER BY repository_id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	for rows.Next() {
		var x row
		if err := rows.Scan(&x.repository, &x.installation, &x.present, &x.removed); err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].repository != 1 || got[0].present == nil || !got[0].present.Equal(at) || got[0].removed != nil ||
		got[1].repository != 2 || got[1].removed == nil || !got[1].removed.Equal(at) || got[1].present != nil ||
		got[0].installation != 7 || got[1].installation != 7 {
		t.Fatalf("memberships %+v, want repository 1 present and 2 removed at %s under installation 7, none for 3", got, at)
	}
}
