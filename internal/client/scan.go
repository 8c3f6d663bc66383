package client

import (
	"strconv"
	"unicode/utf8"
)

// The answers a load tester gets by the thousand (a sale, a sold-out
// problem) are flat JSON objects of plain strings, integers and booleans.
// scanFlat reads that shape without reflection, each string a substring of
// the body; anything else (an escape, a nested value, a key of another
// spelling) makes it give up, and the caller asks encoding/json, so the two
// never disagree (FuzzScan holds them to it).

// member is one member of a flat object: its key and its value's text (a
// string's without the quotes), by kind.
type member struct {
	key, val string
	kind     byte // '"' string, '0' integer, 't' or 'f' boolean, 'n' null
}

// maxMembers bounds an object scanFlat reads; the service's have 7.
const maxMembers = 12

// scanFlat appends the members of the JSON object s to ms and reports
// whether s is a flat object scanFlat can read. ms should have room for
// maxMembers, so that appending does not allocate.
func scanFlat(s string, ms []member) ([]member, bool) {
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return ms, false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return ms, skipSpace(s, i+1) == len(s)
	}
	for {
		if len(ms) == maxMembers {
			return ms, false
		}
		var m member
		var ok bool
		if m.key, i, ok = scanString(s, i); !ok {
			return ms, false
		}
		i = skipSpace(s, i)
		if i == len(s) || s[i] != ':' {
			return ms, false
		}
		i = skipSpace(s, i+1)
		if m.val, m.kind, i, ok = scanValue(s, i); !ok {
			return ms, false
		}
		ms = append(ms, m)
		i = skipSpace(s, i)
		if i == len(s) {
			return ms, false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return ms, skipSpace(s, i+1) == len(s)
		default:
			return ms, false
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// scanString reads a string without escapes at s[i], returning its text
// and the index after it.
func scanString(s string, i int) (string, int, bool) {
	if i == len(s) || s[i] != '"' {
		return "", i, false
	}
	start, ascii := i+1, true
	for i = start; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			text := s[start:i]
			// encoding/json replaces invalid UTF-8; leave that to it.
			return text, i + 1, ascii || utf8.ValidString(text)
		case c < 0x20 || c == '\\':
			return "", i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", i, false
}

// scanValue reads a string, an integer, true, false or null at s[i].
func scanValue(s string, i int) (val string, kind byte, next int, ok bool) {
	if i == len(s) {
		return "", 0, i, false
	}
	switch c := s[i]; {
	case c == '"':
		val, next, ok = scanString(s, i)
		return val, '"', next, ok
	case c == '-' || '0' <= c && c <= '9':
		start := i
		if c == '-' {
			i++
		}
		digits := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		// No fraction or exponent; no leading zero, as JSON has none.
		if i == digits || s[digits] == '0' && i-digits > 1 || i < len(s) && (s[i] == '.' || s[i] == 'e' || s[i] == 'E') {
			return "", 0, i, false
		}
		return s[start:i], '0', i, true
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(s)-i >= len(lit) && s[i:i+len(lit)] == lit {
			return lit, lit[0], i + len(lit), true
		}
	}
	return "", 0, i, false
}

// setInt sets *dst from an integer member; null leaves it, as
// encoding/json does.
func (m member) setInt(dst *int64) bool {
	switch m.kind {
	case 'n':
		return true
	case '0':
		n, err := strconv.ParseInt(m.val, 10, 64)
		*dst = n
		return err == nil
	}
	return false
}

func (m member) setString(dst *string) bool {
	switch m.kind {
	case 'n':
		return true
	case '"':
		*dst = m.val
		return true
	}
	return false
}

func (m member) setBool(dst *bool) bool {
	switch m.kind {
	case 'n':
		return true
	case 't', 'f':
		*dst = m.kind == 't'
		return true
	}
	return false
}

// scanMembers calls set with each member of the flat object s, and
// reports whether scanFlat could read s and set took every member.
func scanMembers(s string, set func(member) bool) bool {
	var buf [maxMembers]member
	ms, ok := scanFlat(s, buf[:0])
	if !ok {
		return false
	}
	for _, m := range ms {
		if !set(m) {
			return false
		}
	}
	return true
}

// scanSale reads a sale's answer into *sale when scanFlat can.
func scanSale(s string, sale *Sale) bool {
	var out Sale
	if !scanMembers(s, func(m member) bool {
		switch m.key {
		case "sale_id":
			return m.setInt(&out.SaleID)
		case "product_id":
			return m.setString(&out.ProductID)
		case "quantity":
			return m.setInt(&out.Quantity)
		case "remaining":
			return m.setInt(&out.Remaining)
		case "round":
			return m.setInt(&out.Round)
		case "strategy":
			return m.setString(&out.Strategy)
		case "instance":
			return m.setString(&out.Instance)
		}
		return false
	}) {
		return false
	}
	*sale = out
	return true
}

// scanProblem reads a problem's members into p when scanFlat can.
func scanProblem(s string, p *Problem) bool {
	out := *p
	if !scanMembers(s, func(m member) bool {
		switch m.key {
		case "type":
			return m.setString(&out.Type)
		case "title":
			return m.setString(&out.Title)
		case "status": // the answer's own status is the one kept
			return true
		case "detail":
			return m.setString(&out.Detail)
		case "instance":
			return m.setString(&out.InstancePath)
		case "request_id":
			return m.setString(&out.RequestID)
		case "lock_breach":
			return m.setBool(&out.LockBreach)
		}
		return false
	}) {
		return false
	}
	*p = out
	return true
}

// scanHealth reads /healthz's and /readyz's answer into *h when scanFlat
// can.
func scanHealth(s string, h *Health) bool {
	var out Health
	if !scanMembers(s, func(m member) bool {
		switch m.key {
		case "status":
			return m.setString(&out.Status)
		case "instance":
			return m.setString(&out.Instance)
		}
		return false
	}) {
		return false
	}
	*h = out
	return true
}
