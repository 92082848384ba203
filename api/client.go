package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Errors of the client that mean the user asked for something that cannot
// be: the commands exit 2 on them.
var (
	// ErrNoVM means no running VM answers on the socket.
	ErrNoVM = errors.New("no such VM")
	// ErrPermission means the socket belongs to another user.
	ErrPermission = errors.New("permission denied")
)

// RequestError is a VM's refusal: the HTTP status and its one-line reason
// ("already paused").
type RequestError struct {
	Status int
	Msg    string
}

func (e *RequestError) Error() string { return e.Msg }

// Client talks to one VM's socket.
type Client struct {
	Path string
	http *http.Client
}

// NewClient returns a client for the socket at path.
func NewClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}
	return &Client{Path: path, http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Info is GET /v1/vm.
func (c *Client) Info() (Info, error) {
	var i Info
	return i, c.do(http.MethodGet, "/v1/vm", &i)
}

// Stats is GET /v1/stats.
func (c *Client) Stats() (Stats, error) {
	var s Stats
	return s, c.do(http.MethodGet, "/v1/stats", &s)
}

// Metrics is GET /metrics.
func (c *Client) Metrics() (string, error) {
	var b strings.Builder
	err := c.do(http.MethodGet, "/metrics", &b)
	return b.String(), err
}

// Do sends an action (pause, resume, stop) and returns the VM's info after
// it.
func (c *Client) Do(action string) (Info, error) {
	var i Info
	return i, c.do(http.MethodPost, "/v1/"+action, &i)
}

// do makes one request; out is a JSON target or a *strings.Builder.
func (c *Client) do(method, path string, out any) error {
	req, err := http.NewRequest(method, "http://govm"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return dialError(c.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e Error
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = resp.Status
		}
		return &RequestError{Status: resp.StatusCode, Msg: e.Error}
	}
	if b, ok := out.(*strings.Builder); ok {
		b.Write(body)
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: bad answer: %w", c.Path, err)
	}
	return nil
}

// dialError says in user terms why the socket did not answer.
func dialError(path string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w (nothing answers on %s)", ErrNoVM, path)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%w on %s (the VM belongs to another user: run as that user or root)", ErrPermission, path)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// Find returns a client for the VM called name: its socket in Dir.
func Find(name string) (*Client, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	p := SocketPath(name)
	if _, err := os.Lstat(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w (no %s; govm list shows the running VMs)", ErrNoVM, p)
		}
		return nil, dialError(p, err)
	}
	return NewClient(p), nil
}

// List returns the info of every VM with a live socket in dir, by name.
// Sockets nobody answers on (a govm that was killed) are skipped.
func List(dir string) ([]Info, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing VMs: %w", err)
	}
	var out []Info
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".sock") {
			continue
		}
		c := NewClient(filepath.Join(dir, e.Name()))
		c.http.Timeout = 2 * time.Second
		i, err := c.Info()
		c.Close()
		if err == nil {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}
