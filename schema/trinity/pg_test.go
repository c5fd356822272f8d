package trinity_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/trinity/pgtest"
)

// benchCleanup removes the benchmarks' generated buffers at the end.
var benchCleanup []func()

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	for _, f := range benchCleanup {
		f()
	}
	os.Exit(code)
}

// postgres returns the base URL of the test cluster (pgtest), starting it
// once.
func postgres(t *testing.T) string {
	t.Helper()
	url, skip := pgtest.Start()
	if skip != "" {
		t.Skip("PostgreSQL tests skipped: " + skip)
	}
	return url
}

// pgURL names a table of the test cluster.
func pgURL(t *testing.T, table string) string {
	base := postgres(t)
	return base + "&table=" + strings.ToLower(table)
}

func TestPostgresRoundTrip(t *testing.T) {
	for _, b := range buffers {
		t.Run(b.name, func(t *testing.T) {
			in := filepath.Join(fixtures, b.name+".jsonl")
			url := pgURL(t, "rt_"+b.name) + "&schema_type=" + string(b.kind)
			copyStore(t, in, url)
			sameRows(t, readStore(t, url, storeBatch(7)), readStore(t, in))
			// and back through SQLite: the same rows
			lite := sqliteURL(filepath.Join(t.TempDir(), "b.db"), "T")
			copyStore(t, url, lite)
			sameRows(t, readStore(t, lite), readStore(t, in))
		})
	}
}

func TestPostgresAtomicAndRefusals(t *testing.T) {
	url := pgURL(t, "atomic")
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	writeFile(t, bad, []byte(`{"eid":{"batch":0,"task":0,"run":0,"step":0,"suffix":"a"},"reward":1.0,"prompt_length":2,"tokens":[1,2,3],"logprobs":[-1]}
{"eid":{"batch":0,"task":1,"run":0,"step":0,"suffix":"b"},"reward":1.0,"prompt_length":3,"tokens":[1,2,3],"logprobs":[-1]}
`))
	r := openStore(t, bad)
	_, err := copyErr(r, url)
	r.Close()
	if err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("got %v, want a row 1 error", err)
	}
	if err := readErr(url); err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("table after a failed write: %v", err)
	}
	copyStore(t, filepath.Join(fixtures, "overrides.jsonl"), url)
	r = openStore(t, url)
	defer r.Close()
	if _, err := copyErr(r, pgURL(t, "atomic")+"&if_exists=append", url); err == nil || !strings.Contains(err.Error(), "table being read") {
		t.Fatalf("got %v, want a refusal to write into the table being read", err)
	}
}

// pgAt returns the test cluster's URL for table with the host replaced.
func pgAt(t *testing.T, host, table string) string {
	base := postgres(t)
	return strings.Replace(base, "127.0.0.1", host, 1) + "&table=" + table
}

// TestPostgresSameTable: a write into the table being read is refused
// whatever host names the server (localhost, 127.0.0.1), the user or a
// password; the blob table of a 0.6 buffer counts. Quoted mixed-case names
// are PostgreSQL tables of their own.
func TestPostgresSameTable(t *testing.T) {
	in := pgURL(t, "same_read") + "&layout=0.6"
	copyStore(t, filepath.Join(fixtures, "experience.jsonl"), in)
	for _, out := range []string{
		pgAt(t, "localhost", "same_read") + "&if_exists=append",
		strings.Replace(pgAt(t, "localhost", "same_read"), "rftpipe@", "rftpipe:pw@", 1) + "&if_exists=replace",
		strings.Replace(pgURL(t, "same_read"), "postgresql://", "POSTGRES://", 1) + "&if_exists=append",
		pgAt(t, "localhost", "same_read_blob") + "&if_exists=append",
	} {
		r := openStore(t, in)
		_, err := copyErr(r, out, in)
		r.Close()
		if err == nil || !strings.Contains(err.Error(), "table being read") {
			t.Errorf("%s: got %v, want a refusal to write into the table being read", out, err)
		}
	}
	if n := readStoreRows(t, in); n != 64 {
		t.Errorf("the table read holds %d rows", n)
	}
	r := openStore(t, in)
	defer r.Close()
	if _, err := copyErr(r, pgAt(t, "localhost", "Same_Read"), in); err != nil {
		t.Errorf("a table of its own (quoted): %v", err)
	}
}

// TestPostgresConcurrentWriters: two (three) writers into one missing or
// empty table: one wins, the others are refused (the table holds rows);
// concurrent appends all land.
func TestPostgresConcurrentWriters(t *testing.T) {
	in := filepath.Join(fixtures, "experience.jsonl")
	for _, tc := range []struct {
		name, query string
		writers     int
		wins, rows  int64
	}{
		{"new", "", 3, 1, 64},
		{"empty", "", 2, 1, 64},
		{"append", "&if_exists=append", 3, 3, 3 * 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := pgURL(t, "race_"+tc.name)
			if tc.name == "empty" {
				copyStore(t, in, url)
				db, err := sql.Open("pgx", postgres(t))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec("DELETE FROM race_empty"); err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			errs := make([]error, tc.writers)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := store.Open(in)
					if err != nil {
						errs[i] = err
						return
					}
					defer r.Close()
					_, errs[i] = store.Copy(context.Background(), r, url+tc.query, nil)
				}()
			}
			wg.Wait()
			var wins int64
			for _, err := range errs {
				switch {
				case err == nil:
					wins++
				case !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "already holds 64 rows"):
					t.Errorf("a loser's error: %v", err)
				}
			}
			if wins != tc.wins {
				t.Errorf("%d writers succeeded, want %d", wins, tc.wins)
			}
			if n := readStoreRows(t, url); n != tc.rows {
				t.Errorf("the table holds %d rows, want %d", n, tc.rows)
			}
		})
	}
}

// TestPostgresSecrets: a password in the URL shows in no error and no
// warning: a missing table, a missing database, a malformed URL, a refused
// write, a server that is not there.
func TestPostgresSecrets(t *testing.T) {
	const pw = "s3cr3tPW"
	withPW := func(u string) string { return strings.Replace(u, "rftpipe@", "rftpipe:"+pw+"@", 1) }
	url := withPW(pgURL(t, "secret"))
	copyStore(t, filepath.Join(fixtures, "experience.jsonl"), url)
	var errs []error
	for _, u := range []string{
		withPW(pgURL(t, "nosuch")),
		strings.Replace(withPW(pgURL(t, "secret")), "/postgres?", "/nodb?", 1),
		strings.Replace(url, "127.0.0.1:", "127.0.0.1:x", 1),
		"postgresql://rftpipe:" + pw + "@127.0.0.1:1/postgres?table=t&sslmode=disable",
		strings.Replace(url, "?", "?password="+pw+"&", 1) + "&bogus_param=1",
	} {
		errs = append(errs, readErr(u))
	}
	r := openStore(t, url)
	_, err := copyErr(r, url+"&if_exists=append", url)
	r.Close()
	errs = append(errs, err)
	r = openStore(t, url)
	_, err = copyErr(r, withPW(pgURL(t, "secret")))
	r.Close()
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Errorf("case %d: no error", i)
		} else if strings.Contains(err.Error(), pw) {
			t.Errorf("case %d: the error shows the password: %v", i, err)
		}
	}
}

// TestPostgresConnectErrors: an error of a connection that fell back from
// TLS (sslmode=prefer, the default) says what went wrong, not "server
// refused TLS connection".
func TestPostgresConnectErrors(t *testing.T) {
	base := strings.Replace(postgres(t), "?sslmode=disable", "", 1)
	for u, want := range map[string]string{
		strings.Replace(base, "/postgres", "/nodb", 1) + "?table=t":                 `database "nodb" does not exist`,
		strings.Replace(base, "rftpipe@", "nobody@", 1) + "?table=t":                `role "nobody" does not exist`,
		strings.Replace(base, "/postgres", "/nodb", 1) + "?table=t&sslmode=prefer":  `database "nodb" does not exist`,
		strings.Replace(base, "/postgres", "/nodb", 1) + "?table=t&sslmode=disable": `database "nodb" does not exist`,
	} {
		err := readErr(u)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "refused TLS") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line with %q", u, err, want)
		}
	}
}

// silentServer listens on 127.0.0.1, accepts connections and never
// answers; it returns the address.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

// TestSilentServer: a server that accepts the connection and never
// answers fails the read and the write within connect_timeout, and a
// cancelled context (a signal) stops a connection without one.
func TestSilentServer(t *testing.T) {
	addr := silentServer(t)
	url := "postgresql://u:pw@" + addr + "/db?table=t&connect_timeout=1"
	start := time.Now()
	err := readErr(url)
	if err == nil || !strings.Contains(err.Error(), "cannot connect") || strings.Contains(err.Error(), ":pw@") {
		t.Errorf("read: got %v", err)
	}
	r := openStore(t, filepath.Join(fixtures, "experience.jsonl"))
	_, err = copyErr(r, url)
	r.Close()
	if err == nil || !strings.Contains(err.Error(), "cannot connect") {
		t.Errorf("write: got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("two connects with connect_timeout=1 took %s", d)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(errors.New("interrupted by test")) })
	start = time.Now()
	_, err = store.Open("postgresql://u@"+addr+"/db?table=t&connect_timeout=0", store.Context(ctx))
	if err == nil || !strings.Contains(err.Error(), "interrupted by test") {
		t.Errorf("cancelled connect: got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a cancelled connect returned after %s", d)
	}
}

// TestPostgresReservedTableNames: tables named after keywords, on
// PostgreSQL too.
func TestPostgresReservedTableNames(t *testing.T) {
	in := filepath.Join(fixtures, "experience.jsonl")
	want := readStore(t, in)
	for _, name := range []string{"select", "order", "user", "Group"} {
		for _, lay := range []string{"0.5", "0.6"} {
			u := postgres(t) + "&table=" + name + "&if_exists=replace&layout=" + lay
			if lay == "0.6" {
				u = strings.Replace(u, "table="+name, "table="+name+"_", 1)
			}
			copyStore(t, in, u)
			sameRows(t, readStore(t, u), want)
		}
	}
}
