package wire

import "unicode/utf8"

// The bodies that come and go by the thousand (a sale's body, a sale's
// answer, a sold-out problem, a health answer) are flat JSON objects of
// plain strings, integers and booleans. scanFlat reads that shape without
// reflection, each string a substring of the text; anything else (an
// escape, a nested value, a fraction, a key of another spelling) makes it
// give up, and the caller asks encoding/json, so the two never disagree
// (FuzzScan and FuzzScanSale hold them to it).

// member is one member of a flat object: its key and its value's text (a
// string's without the quotes), by kind.
type member struct {
	key, val string
	kind     byte // '"' string, '0' integer, 't' or 'f' boolean, 'n' null
}

// maxMembers bounds an object scanFlat reads; the service's have at most 8.
const maxMembers = 12

// maxDigits keeps a scanned integer far from int64's overflow, so that
// member.int needs no overflow check; longer ones are left to
// encoding/json.
const maxDigits = 18

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

// skipSpace skips JSON whitespace from s[i].
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// scanString reads a string without escapes or control characters at
// s[i], returning its text and the index after it.
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
		if n := i - digits; n == 0 || n > maxDigits || s[digits] == '0' && n > 1 || i < len(s) && (s[i] == '.' || s[i] == 'e' || s[i] == 'E') {
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

// int is an integer member's value: -?[0-9]{1,maxDigits}, as scanValue
// took it.
func (m member) int() int64 {
	digits, negative := m.val, m.val[0] == '-'
	if negative {
		digits = digits[1:]
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		n = n*10 + int64(digits[i]-'0')
	}
	if negative {
		n = -n
	}
	return n
}

// setInt sets *dst from an integer member; null leaves it, as
// encoding/json does.
func (m member) setInt(dst *int64) bool {
	switch m.kind {
	case 'n':
		return true
	case '0':
		*dst = m.int()
		return true
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

// ScanSaleRequest reads a sale's body of the usual shape,
// {"product_id":"sku-1","quantity":1} (or {"quantity":1}, POST
// /products/{id}/sale's, when withProduct is false), a hold's
// "pay_within":"15m" beside them too, without reflection:
// every buyer's request passes here, the crowd after a sell-out too. It
// takes only what encoding/json, refusing unknown members and trailing
// data, reads the same into a SaleBody (a ProductSaleBody without
// withProduct): each member at most once and not null, in any order, JSON
// whitespace around the tokens, strings without escapes, integers of at
// most 18 digits without fraction or exponent. Anything else it reports as
// not scanned, and the caller decodes the body with encoding/json for its
// answer or its error. The product id is a substring of body.
func ScanSaleRequest(body string, withProduct bool) (req SaleBody, scanned bool) {
	if !scanMembers(body, func(m member) bool {
		switch {
		case m.key == "quantity" && m.kind == '0' && req.Quantity == nil:
			q := m.int()
			req.Quantity = &q
		case m.key == "product_id" && m.kind == '"' && withProduct && req.ProductID == nil:
			id := m.val
			req.ProductID = &id
		case m.key == "pay_within" && m.kind == '"' && req.PayWithin == nil:
			d := m.val
			req.PayWithin = &d
		default: // unknown, repeated, null, or not matched exactly (encoding/json ignores case)
			return false
		}
		return true
	}) {
		return SaleBody{}, false
	}
	return req, true
}

// ScanSale reads a sale's answer into *sale when it can, as encoding/json
// would into a zero Sale.
func ScanSale(s string, sale *Sale) bool {
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

// ScanProblem reads a problem's members into *p when it can, as
// encoding/json would (members the body leaves out keep their values).
func ScanProblem(s string, p *Problem) bool {
	out := *p
	if !scanMembers(s, func(m member) bool {
		switch m.key {
		case "type":
			return m.setString(&out.Type)
		case "title":
			return m.setString(&out.Title)
		case "status":
			return m.setInt(&out.Status)
		case "detail":
			return m.setString(&out.Detail)
		case "instance":
			return m.setString(&out.Instance)
		case "request_id":
			return m.setString(&out.RequestID)
		case "lock_breach":
			return m.setBool(&out.LockBreach)
		case "state":
			return m.setString(&out.State)
		}
		return false
	}) {
		return false
	}
	*p = out
	return true
}

// ScanHealth reads /healthz's and /readyz's answer into *h when it can,
// as encoding/json would into a zero Health.
func ScanHealth(s string, h *Health) bool {
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
