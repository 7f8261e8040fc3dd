package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// roles describes the roles the migrations created — every role of the scratch cluster except
// PostgreSQL's own (pg_*) and the bootstrap superuser — with their attributes, settings and
// memberships. Roles are cluster-wide, so pg_dump of one database leaves them out.
func roles(ctx context.Context, conn *pgx.Conn) (string, error) {
	var b strings.Builder
	rows, err := conn.Query(ctx, `
		SELECT format('CREATE ROLE %I %s %s %s %s %s %s %s%s;', r.rolname,
		           CASE WHEN r.rolsuper THEN 'SUPERUSER' ELSE 'NOSUPERUSER' END,
		           CASE WHEN r.rolinherit THEN 'INHERIT' ELSE 'NOINHERIT' END,
		           CASE WHEN r.rolcreaterole THEN 'CREATEROLE' ELSE 'NOCREATEROLE' END,
		           CASE WHEN r.rolcreatedb THEN 'CREATEDB' ELSE 'NOCREATEDB' END,
		           CASE WHEN r.rolcanlogin THEN 'LOGIN' ELSE 'NOLOGIN' END,
		           CASE WHEN r.rolreplication THEN 'REPLICATION' ELSE 'NOREPLICATION' END,
		           CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' ELSE 'NOBYPASSRLS' END,
		           CASE WHEN r.rolconnlimit <> -1 THEN ' CONNECTION LIMIT ' || r.rolconnlimit ELSE '' END)
		FROM pg_roles r
		WHERE r.rolname !~ '^pg_' AND r.oid <> 10
		ORDER BY r.rolname
	`)
	if err != nil {
		return "", fmt.Errorf("read roles: %w", err)
	}
	created, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("read roles: %w", err)
	}
	b.WriteString("\n-- ROLES (cluster-wide: created when absent, never dropped by a migration)\n")
	for _, c := range created {
		b.WriteString(c + "\n")
	}

	rows, err = conn.Query(ctx, `
		SELECT format('ALTER ROLE %I%s SET %s;', r.rolname,
		           CASE WHEN s.setdatabase <> 0 THEN ' IN DATABASE ' || quote_ident(d.datname) ELSE '' END, cfg)
		FROM pg_db_role_setting s
		JOIN pg_roles r ON r.oid = s.setrole
		LEFT JOIN pg_database d ON d.oid = s.setdatabase
		CROSS JOIN LATERAL unnest(s.setconfig) cfg
		WHERE r.rolname !~ '^pg_' AND r.oid <> 10
		  AND s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
		ORDER BY 1
	`)
	if err != nil {
		return "", fmt.Errorf("read role settings: %w", err)
	}
	settings, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("read role settings: %w", err)
	}
	if len(settings) > 0 {
		b.WriteString("\n-- ROLE SETTINGS\n")
		for _, s := range settings {
			b.WriteString(s + "\n")
		}
	}

	// Memberships in either direction that involve one of our roles; PostgreSQL's built-in
	// memberships (pg_* in pg_*) are left out.
	rows, err = conn.Query(ctx, `
		SELECT format('GRANT %I TO %I%s;', g.rolname, m.rolname,
		           CASE WHEN a.admin_option THEN ' WITH ADMIN OPTION' ELSE '' END)
		FROM pg_auth_members a
		JOIN pg_roles g ON g.oid = a.roleid
		JOIN pg_roles m ON m.oid = a.member
		WHERE (g.rolname !~ '^pg_' AND g.oid <> 10) OR (m.rolname !~ '^pg_' AND m.oid <> 10)
		ORDER BY 1
	`)
	if err != nil {
		return "", fmt.Errorf("read role memberships: %w", err)
	}
	members, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("read role memberships: %w", err)
	}
	b.WriteString("\n-- ROLE MEMBERSHIPS\n")
	if len(members) == 0 {
		b.WriteString("-- (none)\n")
	}
	for _, m := range members {
		b.WriteString(m + "\n")
	}
	return b.String(), nil
}
