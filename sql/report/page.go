package report

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
)

// page is what the HTML template renders.
type page struct {
	Store     string
	Files     int
	Rows      int64
	Generated string
	Elapsed   string
	Numbers   []numberGroup
	// Experiments compares the experiments of a store holding several;
	// nil otherwise.
	Experiments *comparison
	Sections    []section
	Warnings    []string // the store reader's, shown as notes under the header
}

type numberGroup struct {
	Title string
	Rows  []number
}

type number struct{ Label, Value, Note string }

func (g *numberGroup) add(label, value, note string) {
	g.Rows = append(g.Rows, number{label, value, note})
}

// comparison is a table of numbers, one row per experiment.
type comparison struct {
	Header []string
	Rows   [][]string
}

// section is one plot (Image) or, when the data is missing, a Note.
type section struct {
	ID, Title string
	Caption   string
	Note      string
	Image     template.HTML // an <img> of a PNG data URL
}

// image adds a section showing the PNG data URL img. The <img> is built
// here: html/template would write each "+" of the base64 text as "&#43;".
func (p *page) image(id, title, caption string, img dataURL) {
	tag := `<img src="` + string(img) + `" alt="` + html.EscapeString(title) + `">`
	p.Sections = append(p.Sections, section{ID: id, Title: title, Caption: caption, Image: template.HTML(tag)})
}

func (p *page) note(id, title, note string) {
	p.Sections = append(p.Sections, section{ID: id, Title: title, Note: note})
}

func (p *page) render(w io.Writer) error {
	return pageTemplate.Execute(w, p)
}

// text renders a scanned value for the numbers table.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return "–"
	case int64:
		return fint(float64(x))
	case float64:
		return fnum(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// fint renders an integer with thousands separators: 1,000,000.
func fint(f float64) string {
	if math.IsNaN(f) {
		return "–"
	}
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fnum renders a number with 4 significant digits.
func fnum(f float64) string {
	if math.IsNaN(f) {
		return "–"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e6 {
		return fint(f)
	}
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// fpct renders a share as a percentage.
func fpct(f float64) string {
	if math.IsNaN(f) {
		return "–"
	}
	return strconv.FormatFloat(100*f, 'f', 2, 64) + " %"
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"int": func(n int64) string { return fint(float64(n)) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rftpipe report: {{.Store}}</title>
<style>
  :root { color-scheme: light; }
  body { margin: 0; background: #f4f5f7; color: #212121;
         font: 16px/1.5 "Liberation Sans", "DejaVu Sans", Helvetica, Arial, sans-serif; }
  main { max-width: 980px; margin: 0 auto; padding: 24px 24px 48px; }
  header h1 { margin: 0 0 4px; font-size: 28px; color: #0d2b4e; }
  header p { margin: 0; color: #424242; }
  code { font: 14px "DejaVu Sans Mono", Menlo, monospace; background: #e8eaed; padding: 1px 4px; border-radius: 3px; word-break: break-all; }
  nav { margin: 16px 0 8px; }
  nav a { display: inline-block; margin: 0 6px 6px 0; padding: 3px 10px; border-radius: 14px;
          background: #dfe8f3; color: #0d2b4e; text-decoration: none; font-size: 14px; }
  section { background: #fff; border: 1px solid #dcdfe4; border-radius: 8px; padding: 16px 20px; margin: 16px 0; }
  section h2 { margin: 0 0 8px; font-size: 20px; color: #0d2b4e; }
  .caption { margin: 0 0 10px; color: #424242; }
  .note { margin: 0; padding: 10px 14px; background: #fff6e5; border-left: 4px solid #e07b24; color: #4e3300; }
  img { display: block; width: 100%; max-width: 960px; height: auto; margin: 0 auto; }
  table { border-collapse: collapse; width: 100%; font-size: 15px; }
  th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid #eceef1; vertical-align: top; }
  th.group { background: #eef2f7; color: #0d2b4e; font-size: 15px; padding-top: 8px; }
  td.value { font-variant-numeric: tabular-nums; font-weight: bold; white-space: nowrap; }
  td.help { color: #5f6368; font-size: 14px; }
  footer { color: #5f6368; font-size: 13px; margin-top: 24px; }
</style>
</head>
<body>
<main>
<header>
  <h1>Experience store report</h1>
  <p><code>{{.Store}}</code> · {{int .Rows}} experiences · {{.Files}} file(s) · generated {{.Generated}} in {{.Elapsed}}</p>
  {{- range .Warnings}}
  <p class="note warning">warning: {{.}}</p>
  {{- end}}
</header>
<nav>
  <a href="#numbers">Key numbers</a>
  {{- range .Sections}}
  <a href="#{{.ID}}">{{.Title}}</a>
  {{- end}}
</nav>
<section id="numbers">
  <h2>Key numbers</h2>
  <table>
  {{- range .Numbers}}
    <tr><th class="group" colspan="3">{{.Title}}</th></tr>
    {{- range .Rows}}
    <tr><td>{{.Label}}</td><td class="value">{{.Value}}</td><td class="help">{{.Note}}</td></tr>
    {{- end}}
  {{- end}}
  </table>
  {{- with .Experiments}}
  <h3>Per experiment</h3>
  <table>
    <tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
    {{- range .Rows}}
    <tr>{{range $i, $v := .}}{{if $i}}<td class="value">{{$v}}</td>{{else}}<td>{{$v}}</td>{{end}}{{end}}</tr>
    {{- end}}
  </table>
  {{- end}}
</section>
{{- range .Sections}}
<section id="{{.ID}}">
  <h2>{{.Title}}</h2>
  {{- if .Note}}
  <p class="note">{{.Note}}</p>
  {{- else}}
  <p class="caption">{{.Caption}}</p>
  {{.Image}}
  {{- end}}
</section>
{{- end}}
<footer>rftpipe report: numbers and plot data computed with DuckDB SQL over the store (the group, pass@k and duplication
numbers by the canned analyses group_filter, pass_at_k and duplicates: <code>rftpipe sql --list</code>); plots drawn with gonum/plot.</footer>
</main>
</body>
</html>
`))
