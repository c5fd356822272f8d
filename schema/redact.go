package schema

import "strings"

// Redacted replaces a password wherever Redact finds one.
const Redacted = "xxxxx"

// Redact returns s with the password of every URL in it replaced by
// Redacted: the userinfo password (scheme://user:PASSWORD@host) and a
// password query parameter (…?password=PASSWORD). Every store name or URL
// rftpipe shows (errors, summaries, reports, metrics) goes through it; a
// URL runs to the next space or quote, so a password in a malformed URL
// (one with an unescaped / or ? in it, say) is hidden too.
func Redact(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, " \t\n\"'`")
		if end < 0 {
			end = len(s)
		}
		b.WriteString(redactURL(s[:end]))
		s = s[end:]
	}
}

// RedactURL returns the single URL u with its password replaced by
// Redacted, the whole of u taken as the URL: a quote or space in it (a
// password may hold one) does not end it, as it does in Redact's free text.
func RedactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		return u[:i+3] + redactURL(u[i+3:])
	}
	return u
}

// redactURL redacts what follows a scheme's "://" up to the URL's end.
func redactURL(u string) string {
	// The userinfo ends at the URL's last @ (a password may hold an
	// unescaped /, ? or @); the user name before its first : holds no /.
	if at := strings.LastIndexByte(u, '@'); at >= 0 {
		if colon := strings.IndexByte(u[:at], ':'); colon >= 0 && !strings.ContainsAny(u[:colon], "/?") {
			u = u[:colon+1] + Redacted + u[at:]
		}
	}
	q := strings.IndexByte(u, '?')
	if q < 0 {
		return u
	}
	params := strings.Split(u[q+1:], "&")
	for i, p := range params {
		if k, _, ok := strings.Cut(p, "="); ok && strings.EqualFold(k, "password") {
			params[i] = k + "=" + Redacted
		}
	}
	return u[:q+1] + strings.Join(params, "&")
}
