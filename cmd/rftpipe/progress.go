package main

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// progress draws a bar on stderr for long commands when stderr is a terminal
// (--progress auto), always, or never. CI and pipes see nothing; every
// command prints its own one-line summary regardless.
type progress struct {
	bar *progressbar.ProgressBar
}

func newProgress(c *cli.Context, label string, total int64) *progress {
	show := false
	switch c.String("progress") {
	case "always":
		show = true
	case "auto":
		f, ok := c.App.ErrWriter.(*os.File)
		show = ok && term.IsTerminal(int(f.Fd()))
	}
	if !show {
		return &progress{}
	}
	var w io.Writer = c.App.ErrWriter
	return &progress{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("rows"),
		progressbar.OptionThrottle(200_000_000),
		progressbar.OptionClearOnFinish(),
	)}
}

// Add advances the bar by n rows.
func (p *progress) Add(n int64) {
	if p.bar != nil {
		p.bar.Add64(n)
	}
}

// Set shows done of total steps.
func (p *progress) Set(done, total int) {
	if p.bar != nil {
		p.bar.ChangeMax(total)
		p.bar.Set(done)
	}
}

// Total sets the number of rows the bar counts to: it then shows a
// percentage and an ETA.
func (p *progress) Total(n int64) {
	if p.bar != nil {
		p.bar.ChangeMax64(n)
	}
}

// Done removes the bar.
func (p *progress) Done() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
