// Package e2e runs the govm binary as a user does: on the test kernel (L1)
// and on the default Linux guest (L3), in network namespaces it creates,
// against real QEMU where images are shared. It has only tests; `make test`
// hands it the binaries through GOVM_BIN, GOVM_TEST_KERNEL and
// GOVM_LINUX_KERNEL/INITRD, and a plain `go test ./e2e` builds them.
package e2e
