package serial

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestOutputBuffering(t *testing.T) {
	u, _, o := newTestUART()
	for _, b := range []byte("abc") {
		out(u, regRBR, b)
	}
	if got := o.String(); got != "" {
		t.Fatalf("flushed %q before newline or pause", got)
	}
	out(u, regRBR, '\n')
	if got := o.String(); got != "abc\n" {
		t.Fatalf("after newline %q", got)
	}
	out(u, regRBR, '$') // a prompt: no newline follows
	deadline := time.Now().Add(5 * time.Second)
	for o.String() != "abc\n$" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := o.String(); got != "abc\n$" {
		t.Fatalf("timer did not flush the prompt: %q", got)
	}
	out(u, regRBR, '#')
	u.Flush()
	if got := o.String(); got != "abc\n$#" {
		t.Fatalf("Flush: %q", got)
	}
	long := strings.Repeat("x", outBufMax)
	for i := 0; i < len(long); i++ {
		out(u, regRBR, long[i])
	}
	if got := o.String(); len(got) != 6+outBufMax {
		t.Fatalf("full buffer not flushed: have %d bytes", len(got))
	}
}

type failWriter struct{ calls int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.calls++
	return 0, errors.New("broken pipe")
}

func TestOutputErrorKeepsGuestRunning(t *testing.T) {
	w := &failWriter{}
	u := New(&fakeLine{}, w)
	for _, b := range []byte("one\ntwo\n") {
		out(u, regRBR, b)
	}
	if w.calls != 1 {
		t.Fatalf("writer called %d times after failing, want 1", w.calls)
	}
	err := u.Err()
	if err == nil || !strings.Contains(err.Error(), "broken pipe") || !strings.Contains(err.Error(), "8 bytes dropped") {
		t.Fatalf("Err() = %v", err)
	}
	// Registers still work.
	out(u, regSCR, 7)
	if v := in(u, regSCR); v != 7 {
		t.Fatalf("SCR %d after output failure", v)
	}
}

func TestLineErrorReported(t *testing.T) {
	l := &fakeLine{failOn: 1}
	u := New(l, nil)
	out(u, regIER, ierTHRI) // Set(true) fails
	if err := u.Err(); err == nil || !strings.Contains(err.Error(), "fake failure") {
		t.Fatalf("Err() = %v", err)
	}
	out(u, regIER, 0)
	out(u, regIER, ierTHRI) // retried
	if !l.get() {
		t.Fatal("line not raised after a failed Set")
	}
}

func TestEscaper(t *testing.T) {
	tests := []struct {
		name  string
		reads []string
		want  string
		quit  bool
	}{
		{"plain", []string{"ls\r"}, "ls\r", false},
		{"quit", []string{"ab\x01xcd"}, "ab", true},
		{"quit split across reads", []string{"ab\x01", "x"}, "ab", true},
		{"literal ctrl-a", []string{"\x01\x01y"}, "\x01y", false},
		{"unknown escape forwarded", []string{"\x01q"}, "\x01q", false},
		{"uppercase X is not quit", []string{"\x01X"}, "\x01X", false},
		{"ctrl-c passes", []string{"\x03"}, "\x03", false},
		{"pending escape at end", []string{"a\x01"}, "a", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e escaper
			var got []byte
			quit := false
			for _, r := range tc.reads {
				got, quit = e.feed(got, []byte(r))
				if quit {
					break
				}
			}
			if string(got) != tc.want || quit != tc.quit {
				t.Fatalf("got %q quit=%v, want %q quit=%v", got, quit, tc.want, tc.quit)
			}
		})
	}
}

func TestConsoleFromPipe(t *testing.T) {
	u, l, _ := newTestUART()
	out(u, regIIR, fcrEnable)
	out(u, regIER, ierRDI)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	quit := make(chan struct{}, 1)
	restore, err := StartConsole(r, u, func() { quit <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	// Not a terminal: Ctrl-A x is data, not an escape.
	msg := "echo hi\n\x01x" + strings.Repeat("z", 200)
	go func() {
		w.Write([]byte(msg))
		w.Close()
	}()
	var got []byte
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(msg) && time.Now().Before(deadline) {
		if in(u, regLSR)&lsrDR != 0 {
			got = append(got, in(u, regRBR))
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if string(got) != msg {
		t.Fatalf("guest received %q", got)
	}
	select {
	case <-quit:
		t.Fatal("quit called for piped input")
	default:
	}
	checkLevel(t, u, l)
}
