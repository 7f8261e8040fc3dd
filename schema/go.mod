module github.com/boardreadyops/cloud/schema

go 1.26.0
