package view

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
)

// Search modes.
var searchModes = []string{"text", "regex", "tokens"}

// searchData is the search page.
type searchData struct {
	Q, Mode string
	Mark    string // the token ids to mark on a result's page
	Results []record
	Pager   pager
	Note    string
}

// search finds rollouts whose response holds a text (case-insensitive), matches
// a regular expression (RE2), or holds a token-id sequence.
func (v *Viewer) search(w http.ResponseWriter, r *http.Request) error {
	p, err := parseParams(r, "q", "mode", "page")
	if err != nil {
		return err
	}
	d := searchData{Q: p.str("q")}
	if d.Mode, err = p.oneOf("mode", searchModes, "text"); err != nil {
		return err
	}
	page, err := p.page()
	if err != nil {
		return err
	}
	if d.Q == "" {
		return v.render(w, "search", v.page("Search", d))
	}
	var arg any
	switch d.Mode {
	case "text":
		arg = d.Q
	case "regex":
		if err := checkRegexp(d.Q); err != nil {
			return err
		}
		arg = d.Q
	case "tokens":
		ids, err := tokenSeq(d.Q)
		if err != nil {
			return err
		}
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = fmt.Sprint(id)
		}
		d.Mark = strings.Join(parts, " ")
		arg = " " + d.Mark + " "
	}
	var matches []string
	var args []any
	for i, s := range v.sources {
		m, ok := s.searchExprs(d.Mode)
		if !ok {
			continue
		}
		m["src"], m["source"] = fmt.Sprint(i), s.readRows()
		matches = append(matches, query("search_source", m))
		args = append(args, arg)
	}
	if len(matches) == 0 {
		if d.Mode == "tokens" {
			return badRequest("the store has no tokens and prompt_length columns to search token ids in")
		}
		return badRequest("the store has no response text (response_text or messages): search by token ids (mode=tokens)")
	}
	q := query("search", map[string]string{"matches": strings.Join(matches, "\nUNION ALL\n")})
	if d.Results, err = v.records(r.Context(), q, append(args, pageSize+1, (page-1)*pageSize)...); err != nil {
		return err
	}
	more := len(d.Results) > pageSize
	d.Results = d.Results[:min(len(d.Results), pageSize)]
	d.Pager = newPager(page, len(d.Results), more, pageLink("/search", p.q))
	if len(matches) < len(v.sources) {
		d.Note = "The rejected store has no column to search this way; only the store was searched."
	}
	return v.render(w, "search", v.page("Search", d))
}

// searchExprs fills search_source.sql for mode: the match condition on the
// response (one ? parameter) and the snippet shown; false when the source
// has no column to search that way.
func (s source) searchExprs(mode string) (map[string]string, bool) {
	if mode == "tokens" {
		if !s.has(schema.Tokens, schema.PromptLength) {
			return nil, false
		}
		resp := "list_slice(tokens, prompt_length + 1, len(tokens))"
		return map[string]string{
			"match":   "contains(' ' || array_to_string(" + resp + ", ' ') || ' ', ?)",
			"snippet": "array_to_string(list_slice(tokens, prompt_length + 1, prompt_length + 40), ' ')",
		}, true
	}
	c := s.textColumn()
	if c == "" {
		return nil, false
	}
	match := "contains(lower(" + c + "), lower(?))"
	if mode == "regex" {
		match = "regexp_matches(" + c + ", ?)"
	}
	return map[string]string{"match": match, "snippet": "left(" + c + ", 300)"}, true
}
