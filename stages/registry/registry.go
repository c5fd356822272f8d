// Package registry is the one name → implementation table behind every
// pluggable family of rftpipe (policy losses, KL functions, entropy terms, …),
// in the style of arrow-go's compute registry: families are registered by
// explicit calls, never by init side effects, a name may be registered once,
// and Names is sorted for help texts and error messages.
package registry

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
)

// Registry maps names to values of one family. The zero value is not usable;
// call New. It is not safe for concurrent Add; concurrent Get is fine once
// registration is done.
type Registry[T any] struct {
	family string
	items  map[string]T
}

// New returns an empty registry; family names the kind of entry in errors
// ("policy loss", "KL function").
func New[T any](family string) *Registry[T] {
	return &Registry[T]{family: family, items: map[string]T{}}
}

// Add registers v under name; a name registered twice is an error.
func (r *Registry[T]) Add(name string, v T) error {
	if _, dup := r.items[name]; dup {
		return fmt.Errorf("registry: %s %q registered twice", r.family, name)
	}
	r.items[name] = v
	return nil
}

// Get returns the entry registered under name. An unknown name is an error
// wrapping schema.ErrBadInput that lists the valid names.
func (r *Registry[T]) Get(name string) (T, error) {
	v, ok := r.items[name]
	if !ok {
		return v, schema.BadInputf("unknown %s %q (valid: %s)", r.family, name, strings.Join(r.Names(), ", "))
	}
	return v, nil
}

// Names returns the registered names, sorted.
func (r *Registry[T]) Names() []string {
	out := make([]string, 0, len(r.items))
	for k := range r.items {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Of returns a registry holding a fixed table of entries (map keys are
// unique, so no name can clash).
func Of[T any](family string, entries map[string]T) *Registry[T] {
	r := New[T](family)
	for name, v := range entries {
		r.items[name] = v
	}
	return r
}

// Entry describes one registered component, the same for every family:
// what help texts, `rftpipe algorithms`, job-file checks and conformance
// iterate over.
type Entry struct {
	Name   string
	Doc    string
	Params args.Schema
}

// Family is a registry seen through its entries: every family (advantage
// fns, add strategies, policy losses, KL and entropy functions, rollout
// options, sample strategies, algorithm presets, experience operators,
// conformance kinds) is reached the same way.
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

// Family returns the registry as a Family; describe gives an item's doc and
// parameters (its name is the registered one).
func (r *Registry[T]) Family(describe func(T) Entry) Family {
	return family[T]{r: r, describe: describe}
}

type family[T any] struct {
	r        *Registry[T]
	describe func(T) Entry
}

func (f family[T]) Names() []string { return f.r.Names() }

func (f family[T]) Entry(name string) (Entry, error) {
	v, err := f.r.Get(name)
	if err != nil {
		return Entry{}, err
	}
	e := f.describe(v)
	e.Name = name
	return e, nil
}

func (f family[T]) Entries() []Entry {
	names := f.r.Names()
	out := make([]Entry, len(names))
	for i, n := range names {
		out[i], _ = f.Entry(n)
	}
	return out
}

func (f family[T]) Params(name string) (args.Schema, error) {
	e, err := f.Entry(name)
	return e.Params, err
}
