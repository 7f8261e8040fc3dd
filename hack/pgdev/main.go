// Command pgdev runs a project-local PostgreSQL server for development (make run, make migrate):
// a durable cluster under --dir that keeps its data across runs, listening only on 127.0.0.1. It
// creates the database when missing, prints its URL (also into --url-file) and serves until
// SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/boardreadyops/cloud/pkg/testkit/pgcluster"
)

func main() {
	dir := flag.String("dir", ".data/postgres", "cluster directory (kept across runs)")
	port := flag.Int("port", 55432, "port on 127.0.0.1")
	dbName := flag.String("database", "boardreadyops", "database to create when missing")
	urlFile := flag.String("url-file", "", "write the database URL to this file once ready")
	var settings settingList
	flag.Var(&settings, "set", "extra server setting name=value (repeatable), e.g. shared_preload_libraries=pg_stat_statements")
	flag.Parse()

	err := func() error {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return run(ctx, *dir, *port, *dbName, *urlFile, settings)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgdev:", err)
		os.Exit(1)
	}
}

// settingList collects repeated --set flags.
type settingList []string

func (s *settingList) String() string { return strings.Join(*s, " ") }
func (s *settingList) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want name=value", v)
	}
	*s = append(*s, v)
	return nil
}

func run(ctx context.Context, dir string, port int, dbName, urlFile string, settings []string) error {
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Port: port, Durable: true, Settings: settings})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgdev: stop:", err)
		}
	}()
	if err := createDatabase(ctx, c.URL("postgres"), dbName); err != nil {
		return err
	}
	dbURL := c.URL(dbName)
	if urlFile != "" {
		if err := os.WriteFile(urlFile, []byte(dbURL+"\n"), 0o600); err != nil {
			return fmt.Errorf("write url file: %w", err)
		}
		defer os.Remove(urlFile)
	}
	fmt.Printf("PostgreSQL ready: DATABASE_URL=%s (data in %s)\n", dbURL, c.Dir())
	<-ctx.Done()
	return nil
}

func createDatabase(ctx context.Context, adminURL, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}
