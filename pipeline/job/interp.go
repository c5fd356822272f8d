package job

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Interpolation: Trinity-RFT configs are OmegaConf files, and take values
// from the environment with `${oc.env:VAR,default}`. rftpipe resolves that
// resolver, and only it, in the sections it reads, as OmegaConf does:
//
//   - `${oc.env:VAR}` is VAR's value; an unset VAR is an error.
//   - `${oc.env:VAR,default}` is VAR's value, or default when VAR is unset;
//     a quoted default loses its quotes, and `null` is null.
//   - A value that is one interpolation is typed by what it resolves to
//     ("8" becomes an integer, as Trinity's typed config converts it); an
//     interpolation inside a longer string is string substitution.
//
// Sections rftpipe ignores are not resolved, so an unset variable there is
// no error.

// ocEnv is the resolver rftpipe knows.
const ocEnv = "oc.env:"

// interp returns n with the interpolations of its scalars resolved (n
// itself when it holds none); path locates errors.
func (d *decoder) interp(n *yaml.Node, path string) (*yaml.Node, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return n, nil
		}
		val, tag, err := interpolate(n.Value)
		if err != nil {
			return nil, d.errf(n, path, "%v", err)
		}
		c := *n
		c.Value, c.Tag = val, tag
		if tag != "!!str" {
			c.Style = 0
		}
		return &c, nil
	case yaml.SequenceNode, yaml.MappingNode:
		var out *yaml.Node
		for i, e := range n.Content {
			if e.Kind == yaml.AliasNode {
				continue // resolved where its anchor is read; an alias may refer to itself
			}
			r, err := d.interp(e, path)
			if err != nil {
				return nil, err
			}
			if r != e && out == nil {
				c := *n
				c.Content = append([]*yaml.Node(nil), n.Content...)
				out = &c
			}
			if out != nil {
				out.Content[i] = r
			}
		}
		if out != nil {
			return out, nil
		}
	}
	return n, nil
}

// interpolate resolves the `${oc.env:…}` interpolations of s, returning the
// value and its YAML tag.
func interpolate(s string) (string, string, error) {
	var b strings.Builder
	rest := s
	whole := strings.HasPrefix(s, "${") && strings.IndexByte(s, '}') == len(s)-1
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return "", "", fmt.Errorf("unterminated interpolation in %q", s)
		}
		expr := rest[i+2 : i+end]
		val, isNull, err := resolveEnv(expr)
		if err != nil {
			return "", "", err
		}
		if whole && isNull {
			return "", "!!null", nil
		}
		b.WriteString(rest[:i])
		b.WriteString(val)
		rest = rest[i+end+1:]
	}
	if !whole {
		return b.String(), "!!str", nil
	}
	return b.String(), scalarTag(b.String()), nil
}

// resolveEnv evaluates one `oc.env:VAR[,default]` expression; isNull is
// true for a null default taken.
func resolveEnv(expr string) (val string, isNull bool, err error) {
	if !strings.HasPrefix(expr, ocEnv) {
		return "", false, fmt.Errorf("unsupported interpolation ${%s} (rftpipe resolves ${oc.env:VAR} and ${oc.env:VAR,default})", expr)
	}
	name, def, hasDef := strings.Cut(expr[len(ocEnv):], ",")
	name = strings.TrimSpace(name)
	if name == "" {
		return "", false, fmt.Errorf("${%s} names no environment variable", expr)
	}
	if v, ok := os.LookupEnv(name); ok {
		return v, false, nil
	}
	if !hasDef {
		return "", false, fmt.Errorf("environment variable %s is not set and ${%s} gives no default", name, expr)
	}
	def = strings.TrimSpace(def)
	if def == "null" {
		return "", true, nil
	}
	if len(def) >= 2 && (def[0] == '\'' || def[0] == '"') && def[len(def)-1] == def[0] {
		def = def[1 : len(def)-1]
	}
	return def, false, nil
}

// scalarTag is the YAML tag a plain scalar with value v would get: the
// type a typed config converts the resolved string to.
func scalarTag(v string) string {
	switch v {
	case "true", "false":
		return "!!bool"
	case "null":
		return "!!null"
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return "!!int"
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil && strings.ContainsAny(v, "0123456789") {
		return "!!float"
	}
	return "!!str"
}
