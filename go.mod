module github.com/pysandboxes/pysandboxes

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0
	github.com/hashicorp/go-multierror v1.1.1
	github.com/landlock-lsm/go-landlock v0.11.2
	github.com/seccomp/libseccomp-golang v0.11.1
	golang.org/x/sys v0.50.0
)

require (
	github.com/hashicorp/errwrap v1.0.0 // indirect
	kernel.org/pub/linux/libs/security/libcap/psx v1.2.78 // indirect
)
