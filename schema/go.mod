module github.com/boardreadyops/cloud/schema

go 1.26.0

toolchain go1.27.3
