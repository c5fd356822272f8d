package job

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Interpolation: Trinity-RFT configs are OmegaConf files; they take values
// from the environment with `${oc.env:VAR,default}` and from other keys
// with `${a.b.c}` (absolute) or `${.x}`, `${..y.x}` (relative to the key's
// mapping, one more dot per level up). rftpipe resolves those, as OmegaConf
// does, lazily: only the keys rftpipe reads are resolved, each when it is
// read, so a config does not need the environment of Trinity's other
// services (an explorer's taskset path). An interpolation that cannot be
// resolved in a key rftpipe ignores is listed among the notes (--verbose).
//
//   - `${oc.env:VAR}` is VAR's value; an unset VAR is an error.
//   - `${oc.env:VAR,default}` is VAR's value, or default when VAR is unset;
//     a quoted default loses its quotes, and `null` is null.
//   - `${a.b}` is the value of key a.b (itself resolved); a key that is
//     missing, not a scalar, or refers back to itself is an error.
//   - A value that is one interpolation is typed by what it resolves to
//     ("8" becomes an integer, as Trinity's typed config converts it); an
//     interpolation inside a longer string is string substitution.

// ocEnv is the environment resolver.
const ocEnv = "oc.env:"

// maxRefDepth bounds a chain of key references (a cycle is an error).
const maxRefDepth = 32

// interp returns n with the interpolations of its scalars resolved (n
// itself when it holds none); path is n's dotted key, which locates errors
// and starts relative references.
func (d *decoder) interp(n *yaml.Node, path string) (*yaml.Node, error) {
	return d.interpDepth(n, path, 0)
}

func (d *decoder) interpDepth(n *yaml.Node, path string, depth int) (*yaml.Node, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return n, nil
		}
		val, tag, err := d.interpolate(n.Value, path, depth)
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
			sub := path
			if n.Kind == yaml.MappingNode && i%2 == 1 {
				sub = join(path, n.Content[i-1].Value)
			}
			r, err := d.interpDepth(e, sub, depth)
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

// unresolved notes the interpolations of ignored node n (key path) that
// cannot be resolved: rftpipe never reads them, so they are no error.
func (d *decoder) unresolved(n *yaml.Node, path string) {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if strings.Contains(n.Value, "${") {
			if _, _, err := d.interpolate(n.Value, path, 0); err != nil {
				d.unresolvable = append(d.unresolvable, fmt.Sprintf("%s (line %d): %v", path, n.Line, err))
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.unresolved(n.Content[i+1], join(path, n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			d.unresolved(e, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// interpolate resolves the interpolations of s, the value of key path,
// returning the value and its YAML tag.
func (d *decoder) interpolate(s, path string, depth int) (string, string, error) {
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
		var val, tag string
		var err error
		if strings.HasPrefix(expr, ocEnv) {
			var isNull bool
			val, isNull, err = resolveEnv(expr)
			tag = scalarTag(val)
			if isNull {
				tag = "!!null"
			}
		} else {
			val, tag, err = d.reference(expr, path, depth)
		}
		if err != nil {
			return "", "", err
		}
		if whole {
			return val, tag, nil
		}
		b.WriteString(rest[:i])
		b.WriteString(val)
		rest = rest[i+end+1:]
	}
	return b.String(), "!!str", nil
}

// reference resolves `${KEY}`, a reference from key path to another key of
// the file, returning its value and tag.
func (d *decoder) reference(expr, path string, depth int) (string, string, error) {
	if strings.Contains(expr, ":") || strings.TrimSpace(expr) == "" {
		return "", "", fmt.Errorf("unsupported interpolation ${%s} (rftpipe resolves ${oc.env:VAR}, ${oc.env:VAR,default} and ${KEY})", expr)
	}
	key := expr
	if strings.HasPrefix(expr, ".") { // relative: from the mapping holding path
		up := len(expr) - len(strings.TrimLeft(expr, "."))
		parts := strings.Split(path, ".")
		if up > len(parts) {
			return "", "", fmt.Errorf("${%s} climbs above the top of the file", expr)
		}
		key = join(strings.Join(parts[:len(parts)-up], "."), expr[up:])
	}
	if depth >= maxRefDepth {
		return "", "", fmt.Errorf("${%s}: references nest deeper than %d (a cycle?)", expr, maxRefDepth)
	}
	n := d.root
	for _, k := range strings.Split(key, ".") {
		n = resolveAlias(n)
		var next *yaml.Node
		if n != nil && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					next = n.Content[i+1]
				}
			}
		}
		if next == nil {
			return "", "", fmt.Errorf("${%s}: the file has no key %s", expr, key)
		}
		n = next
	}
	n = resolveAlias(n)
	if n.Kind != yaml.ScalarNode {
		return "", "", fmt.Errorf("${%s}: key %s is %s, not a value", expr, key, describe(n))
	}
	if !strings.Contains(n.Value, "${") {
		return n.Value, n.Tag, nil
	}
	return d.interpolate(n.Value, key, depth+1)
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
