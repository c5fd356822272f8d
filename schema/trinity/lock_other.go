//go:build !unix

package trinity

import "os"

// tryLock has no flock(2) to take here: writers of one file are serialised
// by SQLite's own lock only (BEGIN IMMEDIATE).
func tryLock(*os.File) (bool, error) { return true, nil }

// lockHolder cannot tell here.
func lockHolder(string) string { return "" }
