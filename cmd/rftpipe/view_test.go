package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestViewCommand serves the README's store until the context (the signal)
// is done, then exits 0; a warning names an address off loopback.
func TestViewCommand(t *testing.T) {
	t.Chdir("../..")
	for _, c := range []struct {
		name, host string
		warn       bool
	}{
		{"loopback", "127.0.0.1", false},
		{"every interface", "0.0.0.0", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, port, _ := net.SplitHostPort(freeAddr(t))
			addr := net.JoinHostPort(c.host, port)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				stderr string
				code   int
			}
			done := make(chan result, 1)
			go func() {
				_, stderr, code := runCLIContext(t, ctx, "view", "fixtures/stores/demo.parquet", "--addr", addr)
				done <- result{stderr, code}
			}()
			var body string
			for end := time.Now().Add(60 * time.Second); time.Now().Before(end) && body == ""; time.Sleep(100 * time.Millisecond) {
				resp, err := http.Get("http://127.0.0.1:" + port + "/")
				if err != nil {
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				body = string(b)
			}
			if !strings.Contains(body, `id="n-rollouts">384<`) {
				t.Errorf("the overview lacks the store's 384 rollouts:\n%s", body)
			}
			cancel()
			r := <-done
			if r.code != 0 || !strings.Contains(r.stderr, "view: stopped") {
				t.Errorf("exit %d, want 0 after stopping; stderr:\n%s", r.code, r.stderr)
			}
			if got := strings.Contains(r.stderr, "warning: --addr "+addr+" serves the store to every host"); got != c.warn {
				t.Errorf("warning printed: %v, want %v; stderr:\n%s", got, c.warn, r.stderr)
			}
		})
	}
}

func TestViewCommandBadInput(t *testing.T) {
	t.Chdir("../..")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"view"}, "view takes one STORE"},
		{[]string{"view", "fixtures/stores/demo.parquet", "--addr", "8080"}, "--addr 8080: want HOST:PORT"},
		{[]string{"view", "fixtures/stores/absent.parquet", "--addr", "127.0.0.1:0"}, "absent.parquet"},
		{[]string{"view", "fixtures/stores/demo.parquet", "--rejected", "fixtures/stores/absent.parquet", "--addr", "127.0.0.1:0"}, "absent.parquet"},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", c.args, code, stderr, c.want)
		}
	}
}
