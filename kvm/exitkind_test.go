package kvm

import "testing"

// TestExitKinds: every Exit type has its own kind, and every kind a
// distinct name (the names are govm stat's and /metrics' exit labels).
func TestExitKinds(t *testing.T) {
	exits := []struct {
		e    Exit
		want ExitKind
	}{
		{ExitIO{}, KindIOIn}, {ExitIO{Write: true}, KindIOOut}, {ExitMMIO{}, KindMMIO}, {ExitIntr{}, KindIntr},
		{ExitHLT{}, KindHLT}, {ExitShutdown{}, KindShutdown}, {ExitSystemEvent{}, KindSystemEvent},
		{ExitInternalError{}, KindInternalError}, {ExitFailEntry{}, KindFailEntry}, {ExitUnknown{}, KindUnknown},
	}
	seen := map[ExitKind]bool{}
	for _, x := range exits {
		e, want := x.e, x.want
		if e.Kind() != want {
			t.Errorf("%T%+v: kind %v, want %v", e, e, e.Kind(), want)
		}
		seen[want] = true
	}
	if len(seen) != int(NumExitKinds) {
		t.Errorf("%d kinds reached by exits, %d declared", len(seen), NumExitKinds)
	}
	names := map[string]bool{}
	for k := range NumExitKinds {
		if n := k.String(); n == "" || names[n] {
			t.Errorf("kind %d: name %q empty or repeated", k, n)
		}
		names[k.String()] = true
	}
	if got := (ExitIntr{}).Kind().String(); got != "intr" {
		t.Errorf("intr's name is %q", got)
	}
}
