module github.com/boardreadyops/cloud/hack

go 1.26.0

replace (
	github.com/boardreadyops/cloud/pkg => ../pkg
	github.com/boardreadyops/cloud/schema => ../schema
)

require (
	github.com/boardreadyops/cloud/pkg v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.13.0
)

require (
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/text v0.44.0 // indirect
)
