package trinity

import (
	"context"
	"database/sql"
	"os"
	"strings"
)

// SameTable reports whether writing the buffer at out would write into a
// table that reading the buffer at in uses: <name>, or its 0.6 blob table
// <name>_blob, of either. Tables are compared as the database resolves
// them, not by the URLs' text: an SQLite database by file identity (device
// and inode, whatever the path's spelling, symbolic or hard links) and its
// table names without regard to ASCII case, as SQLite compares them; a
// PostgreSQL database by the server's system identifier and the database
// name as the server reports them (so localhost and 127.0.0.1, or two
// spellings of one host, are one server) and its tables by oid, as the
// connection's search_path resolves the names. A table out would create
// is no table in is reading.
func SameTable(ctx context.Context, out, in string) (bool, error) {
	lo, err1 := ParseURL(out)
	li, err2 := ParseURL(in)
	if err1 != nil || err2 != nil || lo.Driver != li.Driver {
		return false, nil
	}
	if lo.Driver == "sqlite" {
		so, errO := os.Stat(lo.DSN)
		si, errI := os.Stat(li.DSN)
		if errO != nil || errI != nil || !os.SameFile(so, si) {
			return false, nil
		}
		for _, a := range []string{lo.Table, blobTable(lo)} {
			for _, b := range []string{li.Table, blobTable(li)} {
				if strings.EqualFold(a, b) {
					return true, nil
				}
			}
		}
		return false, nil
	}
	io, err := pgTables(ctx, lo)
	if err != nil {
		return false, err
	}
	ii, err := pgTables(ctx, li)
	if err != nil {
		return false, err
	}
	if io.server != ii.server || io.database != ii.database {
		return false, nil
	}
	for _, a := range io.oids {
		for _, b := range ii.oids {
			if a.Valid && a == b {
				return true, nil
			}
		}
	}
	return false, nil
}

// pgIdentity is where a PostgreSQL buffer's tables are, as the server says.
type pgIdentity struct {
	server, database string
	oids             [2]sql.NullInt64 // <name>, <name>_blob; NULL when absent
}

// pgTables asks the server of loc who it is and which tables loc names:
// the cluster's system identifier (pg_control_system), or, where that is
// not granted, the server's address as it sees the connection (local for a Unix
// socket) and port.
func pgTables(ctx context.Context, loc Location) (id pgIdentity, err error) {
	db, err := open(ctx, loc, false)
	if err != nil {
		return id, err
	}
	defer db.Close()
	err = setup(ctx, loc, "cannot identify the server", func(ctx context.Context) error {
		q := `SELECT system_identifier::text, current_database(), to_regclass($1)::oid::int8, to_regclass($2)::oid::int8 FROM pg_control_system()`
		err := db.QueryRowContext(ctx, q, quoteIdent(loc.Table), quoteIdent(blobTable(loc))).Scan(&id.server, &id.database, &id.oids[0], &id.oids[1])
		if err == nil {
			return nil
		}
		q = `SELECT coalesce(host(inet_server_addr()), 'local') || ':' || current_setting('port'), current_database(), to_regclass($1)::oid::int8, to_regclass($2)::oid::int8`
		return db.QueryRowContext(ctx, q, quoteIdent(loc.Table), quoteIdent(blobTable(loc))).Scan(&id.server, &id.database, &id.oids[0], &id.oids[1])
	})
	if err != nil {
		return id, locErr(loc, "cannot identify the server: %v", err)
	}
	return id, nil
}
