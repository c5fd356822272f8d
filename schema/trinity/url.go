package trinity

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
)

// A buffer is named by an SQLAlchemy-style database URL plus the table:
//
//	sqlite:///relative/buffer.db?table=NAME
//	sqlite:////absolute/buffer.db?table=NAME
//	postgresql://user@host:5432/db?table=NAME
//
// Query parameters read here: table (required), schema_type (experience,
// dpo or sft: the layout of a table to create; read from an existing
// table's columns otherwise), if_exists (error, append or replace: what
// writing into a table that already holds rows does), layout (0.5 or 0.6:
// the tables a write creates, see Layout; read from the tables otherwise)
// on_missing_blob (error or skip: what reading a 0.6 metadata row
// without its blob row does) and lock_wait (seconds a writer waits for
// another writer's lock on the database or table, DefaultLockWait when not
// given). Other parameters of a
// PostgreSQL URL (sslmode, …) go to the driver; connect_timeout (seconds
// to connect and log in, 0 for no limit) is DefaultConnectTimeout when not
// given. A driver suffix as SQLAlchemy spells it (postgresql+psycopg2://)
// is accepted, and the scheme's case does not matter.

// Location is a parsed buffer URL.
type Location struct {
	URL              string // as given
	Driver           string // "sqlite" or "pgx"
	DSN              string // what the driver opens: a file path or a PostgreSQL URL
	Table            string
	Kind             Kind   // from schema_type; "" when not given
	IfExists         string // error, append or replace
	Layout           Layout // from layout; "" when not given
	SkipMissingBlobs bool   // on_missing_blob=skip
	LockWait         time.Duration
}

// params are the query parameters ParseURL reads (the others of a
// PostgreSQL URL go to the driver).
var params = map[string]bool{"table": true, "schema_type": true, "if_exists": true, "layout": true, "on_missing_blob": true, "lock_wait": true}

// DefaultConnectTimeout is how long connecting to a PostgreSQL server
// (TCP, TLS and login) may take when the URL has no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// IsURL reports whether a store argument is a URL (scheme://…): a database
// buffer, or a scheme ParseURL refuses by name; never a file path, nor an
// object of object storage (s3://, package objstore), which is a path.
func IsURL(s string) bool {
	return urlScheme.MatchString(s) && !objstore.IsURL(s)
}

var (
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ParseURL parses a buffer URL.
func ParseURL(s string) (Location, error) {
	loc := Location{URL: s, IfExists: "error", LockWait: DefaultLockWait}
	q, err := loc.connection(s)
	if err == nil {
		err = loc.setParams(q)
	}
	if err != nil {
		return Location{}, schema.Errorf(s, -1, "", "%v", err)
	}
	return loc, nil
}

// connection sets loc's driver and DSN from the URL s and returns its query
// parameters.
func (loc *Location) connection(s string) (url.Values, error) {
	scheme, rest, _ := strings.Cut(s, "://")
	scheme, _, _ = strings.Cut(strings.ToLower(scheme), "+")
	switch scheme {
	case "sqlite":
		path, query, _ := strings.Cut(rest, "?")
		if !strings.HasPrefix(path, "/") || len(path) < 2 {
			return nil, errors.New("want sqlite:///relative/path.db or sqlite:////absolute/path.db")
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, fmt.Errorf("bad query: %v", err)
		}
		for k := range q {
			if !params[k] {
				return nil, fmt.Errorf("unknown parameter %q (known: table, schema_type, if_exists, layout, on_missing_blob, lock_wait)", k)
			}
		}
		loc.Driver, loc.DSN = "sqlite", path[1:]
		return q, nil
	case "postgresql", "postgres":
		u, err := url.Parse("postgresql://" + rest)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // url.Error quotes the URL, password and all
			}
			return nil, fmt.Errorf("bad URL: %v", err)
		}
		q := u.Query()
		pass := url.Values{}
		for k, v := range q {
			if !params[k] {
				pass[k] = v
			}
		}
		switch t := pass.Get("connect_timeout"); {
		case t == "":
			pass.Set("connect_timeout", strconv.Itoa(int(DefaultConnectTimeout/time.Second)))
		case !isSeconds(t):
			return nil, fmt.Errorf("connect_timeout=%q: want whole seconds (0: no limit)", t)
		}
		u.RawQuery = pass.Encode()
		loc.Driver, loc.DSN = "pgx", u.String()
		return q, nil
	default:
		return nil, fmt.Errorf("unknown scheme %s:// (a store is a file, a directory, a glob, or a buffer URL: sqlite:///FILE?table=NAME or postgresql://USER@HOST/DB?table=NAME)", scheme)
	}
}

// setParams sets loc from rftpipe's query parameters (params).
func (loc *Location) setParams(q url.Values) error {
	loc.Table = q.Get("table")
	if loc.Table == "" {
		return errors.New("names no table: add ?table=NAME (the buffer's `name` in the Trinity config)")
	}
	if !tableName.MatchString(loc.Table) {
		return fmt.Errorf("table name %q: want letters, digits and underscores", loc.Table)
	}
	if loc.Driver == "pgx" && len(loc.Table)+len("_blob") > maxIdent {
		return fmt.Errorf("table name %q: %d bytes, but PostgreSQL keeps names of at most %d bytes and its 0.6 blob table %s_blob would be cut short", loc.Table, len(loc.Table), maxIdent, loc.Table)
	}
	if t := q.Get("lock_wait"); t != "" {
		if !isSeconds(t) {
			return fmt.Errorf("lock_wait=%q: want whole seconds", t)
		}
		n, _ := strconv.Atoi(t)
		loc.LockWait = time.Duration(n) * time.Second
	}
	if st := q.Get("schema_type"); st != "" {
		k, err := ParseKind(st)
		if err != nil {
			return err
		}
		loc.Kind = k
	}
	if m := q.Get("if_exists"); m != "" {
		if m != "error" && m != "append" && m != "replace" {
			return fmt.Errorf("if_exists=%q: want error, append or replace", m)
		}
		loc.IfExists = m
	}
	switch l := Layout(q.Get("layout")); l {
	case "", Layout05, Layout06:
		loc.Layout = l
	default:
		return fmt.Errorf("layout=%q: want 0.5 or 0.6", l)
	}
	switch m := q.Get("on_missing_blob"); m {
	case "", "error":
	case "skip":
		loc.SkipMissingBlobs = true
	default:
		return fmt.Errorf("on_missing_blob=%q: want error or skip", m)
	}
	return nil
}

// Identity names the buffer table independently of how the URL spells it
// and of credentials: the SQLite file's absolute path, or the PostgreSQL
// server, port and database, then the table.
func (l Location) Identity() string {
	if l.Driver == "sqlite" {
		if abs, err := filepath.Abs(l.DSN); err == nil {
			return "sqlite://" + abs + "?table=" + l.Table
		}
		return "sqlite://" + l.DSN + "?table=" + l.Table
	}
	u, err := url.Parse(l.DSN)
	if err != nil {
		return "postgresql://?table=" + l.Table
	}
	return "postgresql://" + u.Host + u.Path + "?table=" + l.Table
}

// maxIdent is the longest name PostgreSQL keeps, in bytes (NAMEDATALEN-1):
// it cuts a longer one short, silently.
const maxIdent = 63

// checkWriteNames refuses a PostgreSQL table whose writer would create a
// name longer than PostgreSQL keeps (an index, ix_<name>_model_version, is
// the longest): two indexes would then get one name, and the second be
// skipped.
func (l Location) checkWriteNames() error {
	if l.Driver != "pgx" {
		return nil
	}
	if n := longestIndex(l); len(n) > maxIdent {
		return schema.Errorf(l.String(), -1, "", "table name %q: a written table's index %s would be %d bytes, over PostgreSQL's %d; use a name of at most %d bytes", l.Table, n, len(n), maxIdent, maxIdent-(len(n)-len(l.Table)))
	}
	return nil
}

// CheckWritable parses a buffer URL an output names and refuses it when a
// writer could not write it as named (checkWriteNames), before any work.
func CheckWritable(rawURL string) error {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return err
	}
	return loc.checkWriteNames()
}

// String returns the URL with any password redacted (schema.RedactURL).
func (l Location) String() string { return schema.RedactURL(l.URL) }

// isSeconds reports whether s is a whole number of seconds, as libpq's
// connect_timeout is.
func isSeconds(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0
}

// BufferURL returns the store URL of a Trinity config's buffer section
// (buffer.trainer_input.experience_buffer): its path (an SQLAlchemy URL),
// storage_type and name (the table). A path without a scheme is taken as
// an SQLite file; an empty path of an sql buffer is upstream's default,
// sqlite:///<cacheDir>/<name>.db. A queue buffer is readable only when its
// path is a database URL (Trinity then records every batch there).
func BufferURL(path, storageType, name, cacheDir string) (string, error) {
	if name == "" {
		return "", schema.BadInputf("trinity buffer: no name (the table)")
	}
	st := strings.ToLower(storageType)
	if st == "" {
		st = "queue"
	}
	switch st {
	case "sql", "queue":
	case "task_dir":
		return "", schema.BadInputf("trinity buffer %q: storage_type task_dir is a directory of task files, not experiences (give the job its input: --in or input:)", name)
	default:
		return "", schema.BadInputf("trinity buffer %q: storage_type %q keeps no table rftpipe can read (want sql, or queue with a database path)", name, storageType)
	}
	if path == "" {
		if st != "sql" {
			return "", schema.BadInputf("trinity buffer %q: a queue buffer without a database path keeps no record", name)
		}
		if cacheDir == "" {
			return "", schema.BadInputf("trinity buffer %q: no path and no buffer.cache_dir", name)
		}
		path = "sqlite:///" + filepath.Join(cacheDir, name+".db")
	}
	if !IsURL(path) {
		if st == "queue" {
			return "", schema.BadInputf("trinity buffer %q: queue path %q is not a database URL", name, path)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", fmt.Errorf("trinity buffer %q: %w", name, err)
		}
		path = "sqlite:///" + abs
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	u := path + sep + "table=" + url.QueryEscape(name)
	if _, err := ParseURL(u); err != nil {
		return "", err
	}
	return u, nil
}
