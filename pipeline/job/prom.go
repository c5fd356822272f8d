package job

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/rftpipe/rftpipe/schema/store"
)

// PromLabels are the labels of every sample of a job's Prometheus file.
type PromLabels struct {
	Algorithm, Input string
	Rows             int64 // input rows
}

// WriteProm writes metrics in the Prometheus text exposition format, as the
// node_exporter textfile collector reads it: one gauge per metric, named
// rftpipe_<metric> with every character outside [a-zA-Z0-9_:] replaced by
// '_', labelled algorithm, input and rows; plus rftpipe_last_run_timestamp_seconds.
// The file is written atomically (temporary file in the same directory,
// then rename), so the collector never reads half a file.
func WriteProm(path string, metrics map[string]float64, l PromLabels, now float64) error {
	labels := fmt.Sprintf(`{algorithm=%s,input=%s,rows="%d"}`, promQuote(l.Algorithm), promQuote(l.Input), l.Rows)
	keys := make([]string, 0, len(metrics))
	for k := range metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys) // collisions resolve the same way every run
	samples := map[string]float64{}
	for _, k := range keys {
		v := metrics[k]
		name := promName(k)
		for i := 2; ; i++ { // distinct metrics that sanitise alike keep distinct names
			if _, dup := samples[name]; !dup {
				break
			}
			name = promName(k) + "_" + strconv.Itoa(i)
		}
		samples[name] = v
	}
	samples["rftpipe_last_run_timestamp_seconds"] = now
	names := make([]string, 0, len(samples))
	for n := range samples {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "# TYPE %s gauge\n%s%s %s\n", n, n, labels, promValue(samples[n]))
	}
	return store.WriteFile(path, func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
}

// promName maps a metric name to a valid Prometheus name.
func promName(metric string) string {
	var b strings.Builder
	b.WriteString("rftpipe_")
	for _, r := range metric {
		if r == '_' || r == ':' || r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// promQuote quotes a label value: backslash, double quote and newline escaped.
func promQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// promValue formats a sample value (NaN, +Inf and -Inf as Prometheus spells them).
func promValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

