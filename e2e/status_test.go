package e2e

// govm's exit statuses, the contract docs/usage.md ("Exit status") documents (cmd/govm
// keeps its own constants: a test that shared them could not catch a
// change of one).
const (
	statusFailure  = 1   // the host or the guest failed
	statusBadInput = 2   // the user must change a flag, a file or a path
	statusPanic    = 4   // the guest kernel panicked
	statusSplat    = 6   // a splat class named by --fail-on was seen
	statusTimeout  = 124 // --timeout expired, as timeout(1)
)
