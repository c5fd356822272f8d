package trinity

import (
	"context"
	"database/sql"
	"strings"

	"github.com/rftpipe/rftpipe/schema/fspath"
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
	return sameTables(ctx, out, in, false)
}

// SameOutput reports whether two buffer outputs write into one table, as
// SameTable compares them, tables not created yet included: an SQLite file
// not created yet by its resolved path, a PostgreSQL table by the schema
// it would be created in (current_schema()) and its name.
func SameOutput(ctx context.Context, a, b string) (bool, error) {
	return sameTables(ctx, a, b, true)
}

func sameTables(ctx context.Context, a, b string, created bool) (bool, error) {
	la, err1 := ParseURL(a)
	lb, err2 := ParseURL(b)
	if err1 != nil || err2 != nil || la.Driver != lb.Driver {
		return false, nil
	}
	if la.Driver == "sqlite" {
		if !fspath.Same(la.DSN, lb.DSN) {
			return false, nil
		}
		for _, x := range []string{la.Table, blobTable(la)} {
			for _, y := range []string{lb.Table, blobTable(lb)} {
				if strings.EqualFold(x, y) {
					return true, nil
				}
			}
		}
		return false, nil
	}
	ia, err := pgTables(ctx, la)
	if err != nil {
		return false, err
	}
	ib, err := pgTables(ctx, lb)
	if err != nil {
		return false, err
	}
	if ia.server != ib.server || ia.database != ib.database {
		return false, nil
	}
	for i, x := range ia.oids {
		for j, y := range ib.oids {
			switch {
			case x.Valid && x == y:
				return true, nil
			case created && !x.Valid && !y.Valid && ia.schema == ib.schema && ia.names[i] == ib.names[j]:
				return true, nil
			}
		}
	}
	return false, nil
}

// pgIdentity is where a PostgreSQL buffer's tables are, as the server says.
type pgIdentity struct {
	server, database, schema string
	names                    [2]string        // <name>, <name>_blob, as quoted
	oids                     [2]sql.NullInt64 // their tables; NULL when absent
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
		id.names = [2]string{quoteIdent(loc.Table), quoteIdent(blobTable(loc))}
		q := `SELECT system_identifier::text, current_database(), coalesce(current_schema(), ''), to_regclass($1)::oid::int8, to_regclass($2)::oid::int8 FROM pg_control_system()`
		err := db.QueryRowContext(ctx, q, id.names[0], id.names[1]).Scan(&id.server, &id.database, &id.schema, &id.oids[0], &id.oids[1])
		if err == nil {
			return nil
		}
		q = `SELECT coalesce(host(inet_server_addr()), 'local') || ':' || current_setting('port'), current_database(), coalesce(current_schema(), ''), to_regclass($1)::oid::int8, to_regclass($2)::oid::int8`
		return db.QueryRowContext(ctx, q, id.names[0], id.names[1]).Scan(&id.server, &id.database, &id.schema, &id.oids[0], &id.oids[1])
	})
	if err != nil {
		return id, locErr(loc, "cannot identify the server: %v", err)
	}
	return id, nil
}
