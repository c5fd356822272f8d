package store

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/fspath"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// Output is one file a command writes, with the flag or argument that names
// it (for messages: "--metrics", "OUT").
type Output struct {
	Flag, Path string
	// Dir, when set, is the directory of parts Path is one file of (a
	// sharded run's --out or --rejected directory, its plan, its part
	// metrics): the command owns that directory whole (--replace replaces
	// it), so no output of another may lie inside it.
	Dir string
}

// CheckOutputs is the one rule every file rftpipe writes obeys, checked
// before any work starts, so that a refused command has touched nothing.
// Paths are compared as the file system resolves them (package fspath).
// An output may not:
//
//   - be, or resolve to (however spelled: relative, through a symbolic
//     link of any component or a hard link), a file the command reads: any
//     file of an input store (every file of a directory or glob store, the
//     database file of an SQLite buffer) or any other input file (a job
//     file);
//   - lie inside a directory store being read, or match a glob store being
//     read (through a symbolic link too): the next read of that store would
//     take it for part of the store (insideOK, --allow-inside-input, allows
//     this one);
//   - name the same file as another output;
//   - lie inside another output's directory of parts (Output.Dir): so
//     neither of two such directories lies inside the other.
//
// An SQLite buffer output's database is a file too: it may not be a file
// read as a file (an input store, a job file) nor another output's file.
//
// A buffer URL output is compared with the URL inputs as a table
// (trinity.SameTable, connecting under ctx), and with the other URL outputs
// (trinity.SameOutput: two outputs may share a database, not a table); one
// whose names PostgreSQL would cut short is refused (trinity.CheckWritable).
// Empty inputs and outputs are skipped. Every refusal wraps
// schema.ErrBadInput and names the output.
func CheckOutputs(ctx context.Context, inputs []string, outs []Output, insideOK bool) error {
	read := readFiles(inputs)
	for i, o := range outs {
		if o.Path == "" {
			continue
		}
		if err := checkParts(o, outs); err != nil {
			return err
		}
		var err error
		if trinity.IsURL(o.Path) {
			err = checkURLOutput(ctx, o, outs[:i], inputs, read)
		} else {
			err = checkFileOutput(o, outs[:i], read, insideOK)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// inputFiles are what a command's inputs read.
type inputFiles struct {
	files []string    // every file read
	plain []string    // those read as files (not an SQLite buffer's database)
	trees []inputTree // the directory and glob stores read
}

// inputTree is a directory (dir) or glob store read, as given (spec).
type inputTree struct{ spec, dir, glob string }

// readFiles returns the files and stores inputs read.
func readFiles(inputs []string) inputFiles {
	var read inputFiles
	for _, in := range inputs {
		switch {
		case in == "":
			continue
		case trinity.IsURL(in):
			if db, ok := sqliteFile(in); ok {
				read.files = append(read.files, db)
			}
			continue
		}
		if st, err := os.Stat(in); err == nil && st.IsDir() || objstore.IsURL(in) && isObjectDir(in) {
			read.trees = append(read.trees, inputTree{spec: in, dir: in})
		} else if hasMeta(in) {
			read.trees = append(read.trees, inputTree{spec: in, glob: in})
		}
		ex, err := Expand(in)
		if err != nil {
			ex = []string{in}
		}
		read.files = append(read.files, ex...)
		read.plain = append(read.plain, ex...)
	}
	return read
}

// checkURLOutput checks the buffer URL output o against the URL outputs
// before it, the URL inputs, and, for an SQLite buffer, the files read and
// the file outputs before it.
func checkURLOutput(ctx context.Context, o Output, before []Output, inputs []string, read inputFiles) error {
	if err := trinity.CheckWritable(o.Path); err != nil {
		return err
	}
	for _, p := range before {
		if !trinity.IsURL(p.Path) {
			continue
		}
		same, err := trinity.SameOutput(ctx, o.Path, p.Path)
		if err != nil {
			return err
		}
		if same {
			return refuse(o, "writes into the table %s writes, %s; give each output its own table", p.Flag, schema.Redact(p.Path))
		}
	}
	for _, in := range inputs {
		if !trinity.IsURL(in) {
			continue
		}
		same, err := trinity.SameTable(ctx, o.Path, in)
		if err != nil {
			return err
		}
		if same {
			return refuse(o, "would write into the table being read, %s", schema.Redact(in))
		}
	}
	// An SQLite buffer's database is a file: no file read, and no
	// other output, may be it.
	db, ok := sqliteFile(o.Path)
	if !ok {
		return nil
	}
	for _, f := range read.plain {
		if fspath.Same(db, f) {
			return refuse(o, "would overwrite the input %s", f)
		}
	}
	for _, p := range before {
		if p.Path != "" && !trinity.IsURL(p.Path) && fspath.Same(db, p.Path) {
			return refuse(o, "is in the file of %s; give each output its own file", p.Flag)
		}
	}
	return nil
}

// checkFileOutput checks the file output o against the files and stores
// read (inside a store only unless insideOK) and the outputs before it.
func checkFileOutput(o Output, before []Output, read inputFiles, insideOK bool) error {
	for _, f := range read.files {
		if fspath.Same(o.Path, f) {
			return refuse(o, "would overwrite the input %s", f)
		}
	}
	if !insideOK {
		for _, t := range read.trees {
			if t.dir != "" && fspath.Within(t.dir, o.Path) {
				return refuse(o, "lies inside the input store %s, which would take it for part of the store next time (--allow-inside-input to write it anyway)", t.spec)
			}
			if t.glob != "" && fspath.Matches(t.glob, o.Path) {
				return refuse(o, "matches the input store %s, which would take it for part of the store next time (--allow-inside-input to write it anyway)", t.spec)
			}
		}
	}
	for _, p := range before {
		other, ok := p.Path, !trinity.IsURL(p.Path)
		if !ok {
			other, ok = sqliteFile(p.Path)
		}
		if p.Path != "" && ok && fspath.Same(o.Path, other) {
			return refuse(o, "is also the file of %s; give each output its own file", p.Flag)
		}
	}
	return nil
}

// checkParts refuses output o when it lies inside the directory of parts
// of another output (Output.Dir) that o is no part of.
func checkParts(o Output, outs []Output) error {
	file, ok := o.Path, !trinity.IsURL(o.Path)
	if !ok {
		if file, ok = sqliteFile(o.Path); !ok {
			return nil
		}
	}
	for _, p := range outs {
		if p.Dir == "" || o.Dir != "" && fspath.Same(o.Dir, p.Dir) {
			continue
		}
		if fspath.Within(p.Dir, file) {
			return refuse(o, "lies inside the directory of parts of %s, %s, which is the run's whole (--replace replaces it): give it a path outside", p.Flag, p.Dir)
		}
	}
	return nil
}

// sqliteFile returns the database file of an SQLite buffer URL.
func sqliteFile(url string) (string, bool) {
	l, err := trinity.ParseURL(url)
	if err != nil || l.Driver != "sqlite" {
		return "", false
	}
	return l.DSN, true
}

func refuse(o Output, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if o.Flag != "" {
		msg = o.Flag + " " + msg
	} else {
		msg = "output " + msg
	}
	return schema.Errorf(o.Path, -1, "", "%s", msg)
}

func hasMeta(p string) bool { return strings.ContainsAny(p, "*?[") }
