package main

import "github.com/urfave/cli/v2"

// catalogFlags are the flags of the commands that register a table in an
// Iceberg SQL catalog.
func catalogFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "catalog", Usage: "register the table in this Iceberg SQL catalog (JDBC/PyIceberg/iceberg-go iceberg_tables): sqlite:PATH or postgres://…"},
		&cli.StringFlag{Name: "catalog-name", Value: "rftpipe", Usage: "the catalog's name (catalog_name) in --catalog"},
		&cli.StringFlag{Name: "catalog-table", Usage: "NAMESPACE.TABLE of the table in --catalog (default: default.DIR, DIR the table directory's name)"},
	}
}
