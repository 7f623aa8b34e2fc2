module github.com/pysandboxes/pysandboxes

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/hashicorp/errwrap v1.0.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
