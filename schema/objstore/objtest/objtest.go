// Package objtest runs an in-process S3 server (gofakes3) for tests, with
// faults injected on request: connections dropped mid-body, 503 SlowDown,
// credentials refused, keys denied.
package objtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Credentials the server accepts (any other access key is refused, as a
// real server does).
const (
	AccessKey = "AKIATESTKEYID"
	SecretKey = "wJalrTestSecretKeyDoNotPrint"
	Bucket    = "rftpipe-test"
)

// Fault is a fault injected into the next requests a rule matches.
type Fault int

// The faults.
const (
	// Drop sends the response's headers and half its body (or reads half
	// the request's body), then drops the connection.
	Drop Fault = iota
	// SlowDown answers 503 SlowDown.
	SlowDown
	// Deny answers 403 AccessDenied.
	Deny
)

// Server is an S3 server for one test, with one bucket, Bucket.
type Server struct {
	*httptest.Server
	Backend *s3mem.Backend

	mu     sync.Mutex
	rules  []*rule
	counts map[string]int      // requests by method
	keys   map[string][]string // the keys of the requests by method, in order
}

type rule struct {
	method, query string // "" matches any; query: a parameter the request has (uploadId, partNumber)
	key           string // key prefix, "" any
	fault         Fault
	times         int // faults left; <0 forever
}

// New starts a server and points the standard environment (t.Setenv) at
// it: endpoint, credentials and region.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{Backend: s3mem.New(), counts: map[string]int{}, keys: map[string][]string{}}
	fake := gofakes3.New(s.Backend, gofakes3.WithAutoBucket(false))
	s.Server = httptest.NewServer(s.handler(fake.Server()))
	t.Cleanup(s.Close)
	if err := s.Backend.CreateBucket(Bucket); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", s.URL)
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return s
}

// URL returns s3://Bucket/key.
func URL(key string) string { return "s3://" + Bucket + "/" + key }

// Inject makes the next n requests (n < 0: all) with this method (""
// any), whose key starts with key and that have query parameter query
// ("" any) fail with fault.
func (s *Server) Inject(method, query, key string, fault Fault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{method: method, query: query, key: key, fault: fault, times: n})
}

// Requests returns how many requests of method the server got.
func (s *Server) Requests(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[method]
}

// Keys returns the keys of the requests of method the server got, in
// order.
func (s *Server) Keys(method string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys[method]...)
}

// Uploads returns the multipart uploads begun and neither completed nor
// aborted, as "KEY" each.
func (s *Server) Uploads(t testing.TB) []string {
	t.Helper()
	res, err := http.NewRequest(http.MethodGet, s.URL+"/"+Bucket+"?uploads", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+AccessKey+"/")
	resp, err := http.DefaultClient.Do(res)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.WriteString(string(buf[:n]))
		if err != nil {
			break
		}
	}
	var out []string
	for _, part := range strings.Split(b.String(), "<Key>")[1:] {
		out = append(out, part[:strings.Index(part, "</Key>")])
	}
	return out
}

func (s *Server) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[r.Method]++
		s.keys[r.Method] = append(s.keys[r.Method], strings.TrimPrefix(r.URL.Path, "/"+Bucket+"/"))
		var hit *rule
		for _, ru := range s.rules {
			if ru.times != 0 && (ru.method == "" || ru.method == r.Method) && (ru.query == "" || r.URL.Query().Has(ru.query)) &&
				strings.HasPrefix(strings.TrimPrefix(r.URL.Path, "/"+Bucket+"/"), ru.key) {
				hit = ru
				if ru.times > 0 {
					ru.times--
				}
				break
			}
		}
		s.mu.Unlock()
		if !strings.Contains(r.Header.Get("Authorization"), "Credential="+AccessKey+"/") {
			s3Error(w, http.StatusForbidden, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
			return
		}
		if hit == nil {
			next.ServeHTTP(w, r)
			return
		}
		switch hit.fault {
		case SlowDown:
			s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
		case Deny:
			s3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied")
		case Drop:
			if r.ContentLength > 0 { // an upload: read half of it, then drop
				buf := make([]byte, r.ContentLength/2)
				r.Body.Read(buf)
				panic(http.ErrAbortHandler)
			}
			next.ServeHTTP(&halfWriter{ResponseWriter: w}, r)
			panic(http.ErrAbortHandler)
		}
	})
}

// halfWriter passes on the headers and the first half of the body.
type halfWriter struct {
	http.ResponseWriter
	left int64
	set  bool
}

func (h *halfWriter) WriteHeader(code int) {
	var n int64
	fmt.Sscan(h.Header().Get("Content-Length"), &n)
	h.left, h.set = n/2, true
	h.ResponseWriter.WriteHeader(code)
}

func (h *halfWriter) Write(p []byte) (int, error) {
	if !h.set {
		h.WriteHeader(http.StatusOK)
	}
	if int64(len(p)) > h.left {
		h.ResponseWriter.Write(p[:h.left])
		h.left = 0
		h.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	h.left -= int64(len(p))
	return h.ResponseWriter.Write(p)
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>1</RequestId></Error>`, code, msg)
}
