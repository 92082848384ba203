package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindRingsim(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := findRingsim(); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("no govm-ringsim anywhere: %v, want an error saying how to build it", err)
	}
	p := filepath.Join(dir, ringsimBinary)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := findRingsim()
	if err != nil || got != p {
		t.Fatalf("findRingsim() = %q, %v; want %q from $PATH", got, err, p)
	}
}
