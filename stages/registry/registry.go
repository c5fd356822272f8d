// Package registry is the one name → spec table behind every pluggable
// family of rftpipe (advantage fns, add strategies, experience operators,
// policy losses, KL and entropy functions, rollout options, sample
// strategies, algorithm presets, conformance kinds), in the style of
// arrow-go's compute registry: a family's table is built by an explicit
// call, never by init side effects, a name may be registered once, and
// Names is sorted for help texts and error messages.
//
// Every entry is a Spec: name, doc, argument schema and the family's own
// constructor. A Registry is immutable once built; With returns a new one.
package registry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
)

// Spec is one registered component of a family whose constructors are of
// type C: its name, a one-line description, its arguments (with upstream's
// constructor and default_args() defaults) and its constructor.
type Spec[C any] struct {
	Name   string
	Doc    string
	Params args.Schema
	New    C
}

// Defaults returns the spec's default_args() (a fresh map).
func (s Spec[C]) Defaults() args.Values { return s.Params.Defaults() }

// Registry is the immutable table of one family's specs by name. Build one
// with New (or Must for a built-in table); it is safe for concurrent use.
type Registry[C any] struct {
	family string
	specs  map[string]Spec[C]
	names  []string
}

// New returns the registry of family ("policy loss", "add strategy", …,
// as errors name it) holding specs; an empty name or a name given twice is
// an error.
func New[C any](family string, specs ...Spec[C]) (*Registry[C], error) {
	r := &Registry[C]{family: family, specs: make(map[string]Spec[C], len(specs))}
	for _, s := range specs {
		if s.Name == "" {
			return nil, fmt.Errorf("registry: %s without a name", family)
		}
		if _, dup := r.specs[s.Name]; dup {
			return nil, fmt.Errorf("registry: %s %q registered twice", family, s.Name)
		}
		r.specs[s.Name] = s
		r.names = append(r.names, s.Name)
	}
	slices.Sort(r.names)
	return r, nil
}

// Must is New for a built-in table, whose names are distinct by
// construction: a clash is a programming error and panics.
func Must[C any](family string, specs ...Spec[C]) *Registry[C] {
	r, err := New(family, specs...)
	if err != nil {
		panic(err)
	}
	return r
}

// With returns a new registry of the same family holding r's specs and
// specs; r is unchanged. A name already in r is an error.
func (r *Registry[C]) With(specs ...Spec[C]) (*Registry[C], error) {
	all := make([]Spec[C], 0, len(r.names)+len(specs))
	for _, n := range r.names {
		all = append(all, r.specs[n])
	}
	return New(r.family, append(all, specs...)...)
}

// Get returns the spec registered under name. An unknown name is an error
// wrapping schema.ErrBadInput that names the family and lists the valid
// names.
func (r *Registry[C]) Get(name string) (Spec[C], error) {
	s, ok := r.specs[name]
	if !ok {
		return s, schema.BadInputf("unknown %s %q (valid: %s)", r.family, name, strings.Join(r.names, ", "))
	}
	return s, nil
}

// Names returns the registered names, sorted (a fresh slice).
func (r *Registry[C]) Names() []string { return slices.Clone(r.names) }

// Entry returns the entry of name; an unknown name is an error as Get's.
func (r *Registry[C]) Entry(name string) (Entry, error) {
	s, err := r.Get(name)
	return Entry{Name: s.Name, Doc: s.Doc, Params: s.Params}, err
}

// Entries returns every entry, sorted by name.
func (r *Registry[C]) Entries() []Entry {
	out := make([]Entry, len(r.names))
	for i, n := range r.names {
		out[i], _ = r.Entry(n)
	}
	return out
}

// Params returns the argument schema of name; an unknown name is an error
// as Get's.
func (r *Registry[C]) Params(name string) (args.Schema, error) {
	s, err := r.Get(name)
	return s.Params, err
}

// Entry is a spec without its constructor: what help texts, `rftpipe
// algorithms`, job-file checks and conformance iterate over.
type Entry struct {
	Name   string
	Doc    string
	Params args.Schema
}

// Family is a registry seen through its entries, whatever its constructor
// type: every *Registry is one.
type Family interface {
	// Names returns the registered names, sorted.
	Names() []string
	// Entries returns every entry, sorted by name.
	Entries() []Entry
	// Entry returns the entry of name; an unknown name is an error listing
	// the registered ones.
	Entry(name string) (Entry, error)
	// Params returns the argument schema of name (Entry(name).Params).
	Params(name string) (args.Schema, error)
}
