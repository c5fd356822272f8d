package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/shard"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// RunReport is what a run did, for the command to print.
type RunReport struct {
	*pipeline.Result
	// Name says what the job computed; Store is the store written (a
	// sharded run's part).
	Name, Store string
	// Since is the increment a run --since-last read (nil otherwise); when
	// nothing was ingested since its last run (Since.New false), nothing
	// was written.
	Since *table.Increment
}

// Run builds the job of a run's options and runs it, in the sequence
// every job command shares:
//
//  1. resolve: the options are validated and the job's input, outputs and
//     monitoring files found (a job file read);
//  2. every output (store, metrics, Prometheus file) is checked against
//     every input and each other (pipeline.Job.CheckOutputs) before
//     anything is written: a refused job touches no file;
//  3. the stages are built, the missing directories of the outputs made,
//     and the store written through a temp file and a rename
//     (pipeline.Run); a sharded run records its part's metrics
//     (OUT/_metrics);
//  4. the metrics and Prometheus files are written, failed or not, with
//     the status gauges; status gives the exit status they report. A job
//     that fails at step 1 writes the files the command line names.
func Run(ctx context.Context, o *RunOptions, status func(error) int) (*RunReport, error) {
	p, res, err := execute(ctx, o, status)
	if err != nil {
		return nil, err
	}
	return &RunReport{Result: res, Name: p.job.Name, Store: p.job.Out, Since: p.since}, nil
}

// execute is Run's sequence for the options of any job command.
func execute(ctx context.Context, c command, status func(error) int) (*plan, *pipeline.Result, error) {
	start := time.Now()
	p, err := c.resolve()
	j := bare(c.common())
	if err == nil {
		j = p.job
	}
	if cerr := j.CheckOutputs(ctx); cerr != nil {
		if err == nil {
			err = cerr
		}
		return nil, nil, err
	}
	if merr := makeMonitorDirs(j); merr != nil {
		if err == nil {
			err = merr
		}
		return nil, nil, err
	}
	var res *pipeline.Result
	if err == nil {
		res, err = p.run(ctx)
	}
	var m map[string]float64
	if res != nil {
		m = res.Metrics
	}
	out := Outcome{Label: j.Label, Metrics: m, ExitCode: status(err), Start: start, Duration: time.Since(start)}
	if werr := out.write(ctx, j.Metrics, j.Prom); err == nil {
		err = werr
	}
	if err != nil {
		return nil, nil, err
	}
	return p, res, nil
}

// bare is the job of options that did not resolve: their input, job file
// and monitoring files, for the failure to be reported in those.
func bare(c *Common) *pipeline.Job {
	j := &pipeline.Job{In: c.In, Metrics: c.Metrics, Prom: c.Prom, Label: c.Label}
	if c.Config != "" {
		j.Reads = []string{c.Config}
	}
	return j
}

// makeMonitorDirs makes the missing directories of the metrics and
// Prometheus files (kept when the job fails: the files report the failure)
// and checks that the files can be written.
func makeMonitorDirs(j *pipeline.Job) error {
	for _, path := range []string{j.Metrics, j.Prom} {
		if path == "" {
			continue
		}
		if _, err := makeDir(path); err != nil {
			return err
		}
		if err := store.CheckWritable(path); err != nil {
			return err
		}
	}
	return nil
}

// run completes the job and runs it, making the directories of its output
// stores (removed again when it fails) and claiming a sharded run's
// directories of parts.
func (p *plan) run(ctx context.Context) (res *pipeline.Result, err error) {
	j := p.job
	if err := p.complete(j); err != nil {
		return nil, err
	}
	if p.since != nil && !p.since.New { // nothing to read: nothing written
		return &pipeline.Result{}, p.commitSince(ctx)
	}
	var made []string // the directories made, removed again when the run fails
	defer func() {
		if err != nil { // err: the named result
			for i := len(made) - 1; i >= 0; i-- {
				os.Remove(made[i])
			}
		}
	}()
	planID := ""
	if p.parts != "" {
		var release func(failed bool)
		if planID, release, err = p.claim(j); err != nil {
			return nil, err
		}
		defer func() { release(err != nil) }()
	} else if p.makeOut && !trinity.IsURL(j.Out) {
		if made, err = makeDir(j.Out); err != nil {
			return nil, err
		}
	}
	if j.Rejected != "" && !trinity.IsURL(j.Rejected) {
		more, merr := makeDir(j.Rejected)
		made = append(made, more...)
		if merr != nil {
			return nil, merr
		}
	}
	if res, err = pipeline.Run(ctx, *j); err != nil {
		return nil, err
	}
	if p.shard != nil {
		part := shard.NewPart(*p.shard, j.Label, planID, res.In, res.Elapsed, res.Metrics, res.Weights)
		if err := part.Write(ctx, p.parts); err != nil {
			return nil, err
		}
	}
	if p.since != nil {
		return res, p.commitSince(ctx)
	}
	return res, nil
}

// commitSince records a --since-last run's watermark, written as every
// side file is (store.WriteFile: atomic, never renamed over a stream or
// through a link), its directory made.
func (p *plan) commitSince(ctx context.Context) error {
	path, record, err := p.since.Mark()
	if err != nil {
		return err
	}
	if _, err := makeDir(path); err != nil {
		return err
	}
	return store.WriteFile(ctx, path, func(w io.Writer) error {
		_, err := w.Write(record)
		return err
	})
}

// claim claims a sharded run's directory of parts, and of rejected parts,
// for its plan (shard.Claim, honouring --replace); release gives them up,
// failed or not.
func (p *plan) claim(j *pipeline.Job) (id string, release func(failed bool), err error) {
	sp, err := shard.NewPlan(p.shard.N, j.In, p.settings)
	if err != nil {
		return "", nil, err
	}
	var done []func(bool)
	release = func(failed bool) {
		for i := len(done) - 1; i >= 0; i-- {
			done[i](failed)
		}
	}
	for _, d := range []struct{ dir, flag string }{{p.parts, "--out"}, {j.RejectedParts, "--rejected"}} {
		if d.dir == "" {
			continue
		}
		f, err := shard.Claim(d.dir, d.flag, sp, p.replace)
		if err != nil {
			release(true)
			return "", nil, err
		}
		done = append(done, f)
	}
	return sp.ID(), release, nil
}

// makeDir makes the directory of an output file, returning the
// directories it made, outermost first.
func makeDir(path string) ([]string, error) {
	if objstore.IsURL(path) {
		return nil, nil // an object's prefix needs no making
	}
	var made []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append([]string{d}, made...)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, schema.Errorf(path, -1, "", "cannot make the output's directory: %v", pe.Err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return made, nil
}
