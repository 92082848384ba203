package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"
)

// Errors a VM returns from Pause and Resume; the server maps them to 409.
var (
	ErrAlreadyPaused = errors.New("already paused")
	ErrNotPaused     = errors.New("not paused")
	ErrNotRunning    = errors.New("not running (stopping)")
)

// VM is what the API controls. Every method is safe from any goroutine.
type VM interface {
	Info() Info
	Stats() Stats
	Pause() error
	Resume() error
	// Stop ends the VM as SIGTERM does; it returns at once.
	Stop()
}

// Server serves the API for one VM.
type Server struct {
	vm   VM
	http *http.Server
	done chan struct{}
}

// Serve starts serving vm on l in a goroutine. Close stops it and removes
// the socket.
func Serve(l net.Listener, vm VM) *Server {
	s := &Server{vm: vm, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/vm", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, vm.Info()) })
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, vm.Stats()) })
	mux.HandleFunc("POST /v1/pause", s.action(vm.Pause))
	mux.HandleFunc("POST /v1/resume", s.action(vm.Resume))
	mux.HandleFunc("POST /v1/stop", s.action(func() error { vm.Stop(); return nil }))
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		WriteMetrics(w, vm.Stats())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, Error{Error: r.Method + " " + r.URL.Path + ": no such endpoint (see docs/api.md)"})
	})
	// The socket is 0600: only its owner (and root) can reach it, so
	// the timeouts only guard against a stuck client, not an attacker.
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(l)
	}()
	return s
}

func (s *Server) action(f func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if err := f(); err != nil {
			writeJSON(w, http.StatusConflict, Error{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, s.vm.Info())
	}
}

// Close stops the server after giving requests in progress, such as the
// answer to a stop, up to 2 s. The socket file stays (see Listen).
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.http.Shutdown(ctx) != nil {
		_ = s.http.Close()
	}
	<-s.done
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
