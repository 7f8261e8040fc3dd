-- Test-only migration of the cluster test's upgrade (hack/test/cluster): the image tag the
-- `helm upgrade` rolls to carries it after the newest migration of schema/migrations, so that the
-- pre-upgrade hook has something to apply. It never enters schema/migrations.

-- +goose Up
CREATE TABLE cluster_test_upgrade (applied_at timestamptz NOT NULL DEFAULT now());
INSERT INTO cluster_test_upgrade DEFAULT VALUES;

-- +goose Down
DROP TABLE cluster_test_upgrade;
