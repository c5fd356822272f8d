package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/fspath"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/store"
)

// PlanFormat is the format tag of a directory of parts' plan file.
const PlanFormat = "rftpipe/shard-plan/v1"

// Plan is what the parts of one output directory share (OUT/_plan.json):
// the shard count, the input store and the job. The first shard to run
// writes it; every other shard, and merge-metrics, refuses a directory
// whose plan differs from its own, so one directory never mixes the parts
// of two jobs, inputs or shard counts.
type Plan struct {
	Format string `json:"format"`
	Shards int    `json:"shards"`
	// Input is the input store as the job reads it (a path made absolute; a
	// URL without its user information); InputFiles its files, each as
	// "NAME SIZE" (NAME relative to the store), so a store changed between
	// shards is told apart.
	Input      string   `json:"input"`
	InputFiles []string `json:"input_files,omitempty"`
	// Job is the job's settings, each "KEY=VALUE" (the command, the fn or
	// algorithm, its arguments, the job file's name and SHA-256, the seed,
	// ...), in a fixed order.
	Job []string `json:"job"`
}

// NewPlan returns the plan of an n-shard job over input with settings job
// ("KEY=VALUE" each).
func NewPlan(n int, input string, job []string) (*Plan, error) {
	p := &Plan{Format: PlanFormat, Shards: n, Input: input, Job: job}
	if objstore.IsURL(input) {
		return p, p.addFiles(input, strings.TrimSuffix(input, "/"))
	}
	if strings.Contains(input, "://") { // a database URL: its password is never recorded
		p.Input = schema.RedactURL(input)
		return p, nil
	}
	abs, err := filepath.Abs(input)
	if err != nil {
		return nil, err
	}
	p.Input = abs
	return p, p.addFiles(input, abs)
}

// addFiles records the files of store input, whose name resolved is abs
// (an object URL as given), each named relative to abs's directory (a
// single file by its base name).
func (p *Plan) addFiles(input, abs string) error {
	files, err := store.Expand(input)
	if err != nil {
		return err
	}
	for _, f := range files {
		size, err := store.Size(f)
		if err != nil {
			return err
		}
		fa := f
		if !objstore.IsURL(f) {
			fa, _ = filepath.Abs(f)
		}
		rel := strings.TrimPrefix(fa, abs[:strings.LastIndexByte(abs, '/')+1])
		if fa == abs {
			rel = path.Base(filepath.ToSlash(f))
		}
		p.InputFiles = append(p.InputFiles, fmt.Sprintf("%s %d", rel, size))
	}
	return nil
}

// ID is the SHA-256 of the plan's JSON: each part's metrics record it.
func (p *Plan) ID() string {
	b, _ := json.Marshal(p)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// PlanPath is the plan file of directory out; its name starts with "_", so
// a store read of out leaves it out.
func PlanPath(out string) string { return fspath.Join(out, "_plan.json") }

// Diff names how plan q differs from p ("" when it does not).
func (p *Plan) Diff(q *Plan) string {
	switch {
	case p.Shards != q.Shards:
		return fmt.Sprintf("shards: %d, not %d", p.Shards, q.Shards)
	case p.Input != q.Input:
		return fmt.Sprintf("input: %s, not %s", p.Input, q.Input)
	}
	if d := listDiff("input file", p.InputFiles, q.InputFiles); d != "" {
		return d
	}
	return listDiff("job", p.Job, q.Job)
}

// listDiff names the first entry in which a differs from b.
func listDiff(what string, a, b []string) string {
	for i := 0; i < max(len(a), len(b)); i++ {
		switch {
		case i >= len(a):
			return fmt.Sprintf("%s: (none), not %s", what, b[i])
		case i >= len(b):
			return fmt.Sprintf("%s: %s, not (none)", what, a[i])
		case a[i] != b[i]:
			return fmt.Sprintf("%s: %s, not %s", what, a[i], b[i])
		}
	}
	return ""
}

// ReadPlan reads the plan of directory out (nil when it has none).
func ReadPlan(out string) (*Plan, error) {
	path := PlanPath(out)
	b, err := store.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := &Plan{}
	if err := json.Unmarshal(b, p); err != nil || p.Format != PlanFormat {
		return nil, schema.Errorf(path, -1, "", "not a shard plan file (format %q)", PlanFormat)
	}
	return p, nil
}

// Claim makes directory out the directory of p's parts for one shard's
// run (out is given by flag, --out or --rejected, which messages name): a directory with no plan and no parts (or none at all) gets p's
// plan; one with p's plan is left as it is; one with another plan, or with
// parts and no plan, is refused naming the difference, unless replace is
// set: then the whole directory is replaced by an empty one holding p's
// plan (built beside it and renamed into place). While the shard runs, a
// marker file (a temp file, swept once its process is gone) says so; done
// removes it and, when the run failed and this shard wrote the plan and no
// other shard is running or has finished, the plan and the directory too.
func Claim(out, flag string, p *Plan, replace bool) (done func(failed bool), err error) {
	for try := 0; ; try++ {
		done, err = claim(out, flag, p, replace)
		// A shard that failed beside this one may have just removed the
		// directory: claim again.
		if err == nil || try == 4 || !errors.Is(err, os.ErrNotExist) {
			return done, err
		}
	}
}

func claim(out, flag string, p *Plan, replace bool) (func(failed bool), error) {
	old, err := ReadPlan(out)
	if err != nil && !replace {
		return nil, err
	}
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case old != nil && old.Diff(p) != "":
		why = fmt.Sprintf("it holds the parts of another plan (%s)", old.Diff(p))
	case old == nil:
		if part := firstPart(out); part != "" {
			why = fmt.Sprintf("it holds %s but no plan (%s)", path.Base(part), path.Base(PlanPath(out)))
		}
	}
	if why != "" && !replace {
		return nil, schema.Errorf(out, -1, "", "%s: give --replace to replace the whole directory, or another %s", why, flag)
	}
	if why != "" {
		if err := replaceDir(out, flag, p); err != nil {
			return nil, err
		}
	} else if err := store.MkdirAll(out); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	unmark, err := mark(out)
	if err != nil {
		return nil, err
	}
	created := why != ""
	if !created && old == nil {
		if created, err = writePlan(out, flag, p); err != nil {
			unmark()
			return nil, err
		}
	}
	return func(failed bool) {
		unmark()
		if failed && created {
			release(out)
		}
	}, nil
}

// mark leaves the marker of a shard running in directory out (a temp
// file, swept once its process is gone) and returns what removes it. A
// prefix in object storage gets none: no process there can tell whether
// the writer of one is alive.
func mark(out string) (func(), error) {
	if objstore.IsURL(out) {
		return func() {}, nil
	}
	marker, err := store.CreateTemp(filepath.Join(out, "_running"))
	if err != nil {
		return nil, err
	}
	marker.Close()
	return func() { os.Remove(marker.Name()) }, nil
}

// release removes the plan of directory out, and the directory, when it
// holds nothing else: no part, and no marker of a shard running.
func release(out string) {
	ents, _ := store.ReadDir(out)
	for _, e := range ents {
		if e != path.Base(PlanPath(out)) && e != path.Base(MetricsDir(out)) {
			return
		}
	}
	if m, _ := store.ReadDir(MetricsDir(out)); len(m) > 0 {
		return
	}
	store.Remove(PlanPath(out))
	if !objstore.IsURL(out) {
		os.Remove(MetricsDir(out))
		os.Remove(out)
	}
}

// firstPart returns a part (store or metrics) in out, if any.
func firstPart(out string) string {
	for _, pat := range []string{fspath.Join(out, "part-*"), fspath.Join(MetricsDir(out), "part-*")} {
		if m, _ := store.Glob(pat); len(m) > 0 {
			return m[0]
		}
	}
	return ""
}

// writePlan writes p as out's plan unless another process has just written
// one: then that one must be p.
func writePlan(out, flag string, p *Plan) (bool, error) {
	b, _ := json.MarshalIndent(p, "", "  ")
	if created, err := store.CreateNew(PlanPath(out), append(b, '\n')); created || err != nil {
		return created, err
	}
	old, err := ReadPlan(out) // a shard beside this one wrote it first
	if err != nil {
		return false, err
	}
	if d := old.Diff(p); d != "" {
		return false, schema.Errorf(out, -1, "", "it holds the parts of another plan (%s): give --replace to replace the whole directory, or another %s", d, flag)
	}
	return false, nil
}

// replaceDir replaces directory out by an empty one holding p's plan.
func replaceDir(out, flag string, p *Plan) error {
	if objstore.IsURL(out) {
		// A prefix is emptied, then given the plan: not atomic, as no
		// rename of a prefix is (nor any change of several objects at
		// once). The part metrics go first, so that merge-metrics counts
		// the old job's shards missing before any of its parts is gone.
		for _, dir := range []string{MetricsDir(out), out} {
			if err := store.RemoveAll(dir); err != nil {
				return err
			}
		}
		_, err := writePlan(out, flag, p)
		return err
	}
	parent := filepath.Dir(filepath.Clean(out))
	fresh, err := os.MkdirTemp(parent, "."+filepath.Base(out)+".new-")
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if _, err := writePlan(fresh, flag, p); err != nil {
		os.RemoveAll(fresh)
		return err
	}
	prefix := "." + filepath.Base(out) + ".new-"
	old := filepath.Join(parent, "."+filepath.Base(out)+".old-"+strings.TrimPrefix(filepath.Base(fresh), prefix))
	if err := os.Rename(out, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		os.RemoveAll(fresh)
		return fmt.Errorf("output directory: %w", err)
	}
	if err := os.Rename(fresh, out); err != nil {
		os.Rename(old, out)
		os.RemoveAll(fresh)
		return fmt.Errorf("output directory: %w", err)
	}
	return os.RemoveAll(old)
}
