package view

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
)

// Search modes.
var searchModes = []string{"text", "regex", "tokens"}

// searchRows is how many rollouts a search page reads at most (v.searchRows),
// by one query per file: a rare match takes several pages, each quick.
const searchRows = 64 << 10

// searchData is the search page.
type searchData struct {
	Q, Mode string
	Mark    string // the token ids to mark on a result's page
	Results []record
	From    int64  // the first id searched
	Last    int64  // the last id searched
	Total   int64  // the rollouts of the index
	Next    string // the link searching on after Last, when rollouts are left
	Note    string
}

// search finds rollouts whose response holds a text (case-insensitive),
// matches a regular expression (RE2), or holds a token-id sequence. A page
// searches on from id from (0 first) in id order, file by file, until it
// has pageSize matches or has read v.searchRows rollouts; it tells how far
// it searched and links the page that searches on.
func (v *Viewer) search(w http.ResponseWriter, r *http.Request) error {
	p, err := parseParams(r, "q", "mode", "from")
	if err != nil {
		return err
	}
	d := searchData{Q: p.str("q"), Total: v.n}
	if d.Mode, err = p.oneOf("mode", searchModes, "text"); err != nil {
		return err
	}
	if d.From, err = p.int("from", 0, v.n, 0); err != nil {
		return err
	}
	if d.Q == "" {
		return v.render(w, "search", v.page("Search", d))
	}
	var args []any
	switch d.Mode {
	case "text":
		args = []any{d.Q}
	case "regex":
		if err := checkRegexp(d.Q); err != nil {
			return err
		}
		args = []any{d.Q}
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
		args = []any{ids[0], " " + d.Mark + " "}
	}
	var skipped []string
	for i, s := range v.sources {
		if _, ok := s.searchExprs(d.Mode); !ok {
			skipped = append(skipped, []string{"store", "rejected store"}[i])
		}
	}
	switch {
	case len(skipped) == len(v.sources) && d.Mode == "tokens":
		return badRequest("the store has no tokens and prompt_length columns to search token ids in")
	case len(skipped) == len(v.sources):
		return badRequest("the store has no response text (response_text or messages): search by token ids (mode=tokens)")
	case len(skipped) > 0:
		d.Note = "The " + skipped[0] + " has no column to search this way: it was not searched."
	}
	pos, need := d.From, pageSize
	for pos < v.n && need > 0 && pos < d.From+v.searchRows {
		i, k := v.fileOf(pos)
		s := v.sources[i]
		m, ok := s.searchExprs(d.Mode)
		if !ok {
			pos = s.first[len(s.files)-1] + s.rows[len(s.files)-1]
			continue
		}
		end := min(s.first[k]+s.rows[k], d.From+v.searchRows)
		m["first"], m["source"] = fmt.Sprint(s.first[k]), s.readFile(k)
		qargs := append([]any{pos - s.first[k], end - 1 - s.first[k]}, args...)
		recs, err := v.records(r.Context(), query("search", m), append(qargs, pos, end-1, need)...)
		if err != nil {
			return err
		}
		d.Results, need, pos = append(d.Results, recs...), need-len(recs), end
		if need == 0 {
			pos = asInt(recs[len(recs)-1]["id"]) + 1
		}
	}
	d.Last = pos - 1
	if pos < v.n {
		q := url.Values{"q": {d.Q}, "mode": {d.Mode}, "from": {fmt.Sprint(pos)}}
		d.Next = "/search?" + q.Encode()
	}
	return v.render(w, "search", v.page("Search", d))
}

// fileOf returns the source and file holding the rollout id (0 ≤ id < v.n).
func (v *Viewer) fileOf(id int64) (src, file int) {
	for i, s := range v.sources {
		for k := range s.files {
			if id < s.first[k]+s.rows[k] {
				return i, k
			}
		}
	}
	panic(fmt.Sprintf("view: no rollout %d", id)) // callers pass ids of the index
}

// searchExprs fills search.sql for mode: the match condition on the
// response (one ? parameter, the text or pattern; two for token ids, the
// first id and the ids as text) and the snippet shown; false when the
// source has no column to search that way.
func (s source) searchExprs(mode string) (map[string]string, bool) {
	if mode == "tokens" {
		if !s.has(schema.Tokens, schema.PromptLength) {
			return nil, false
		}
		// The first id's presence, a cheap test, spares most rows the
		// rendering of their response as text.
		resp := "list_slice(tokens, prompt_length + 1, len(tokens))"
		return map[string]string{
			"match":   "CASE WHEN list_contains(tokens, ?) THEN contains(' ' || array_to_string(" + resp + ", ' ') || ' ', ?) ELSE false END",
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
