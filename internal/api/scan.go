package api

// scanSale reads a sale body of the usual shape,
// {"product_id":"sku-1","quantity":1} (or {"quantity":1} when withProduct
// is false), without reflection: every buyer's request passes here, the
// crowd after a sell-out too. It accepts only what encoding/json reads the
// same way: each member at most once, in any order, JSON whitespace around
// the tokens, strings without escapes, integers of at most 18 digits
// without fraction or exponent. Anything else it reports as not scanned,
// and the caller decodes the body with unmarshalStrict, the reference, for
// its answer or its error. The body must already be valid UTF-8.
func scanSale(body []byte, withProduct bool) (req saleRequest, scanned bool) {
	s := scanner{b: body}
	s.space()
	if !s.take('{') {
		return saleRequest{}, false
	}
	s.space()
	if s.take('}') {
		return req, s.end()
	}
	for {
		key, ok := s.plainString()
		if !ok {
			return saleRequest{}, false
		}
		s.space()
		if !s.take(':') {
			return saleRequest{}, false
		}
		s.space()
		switch {
		case key == "quantity" && req.Quantity == nil:
			q, ok := s.integer()
			if !ok {
				return saleRequest{}, false
			}
			req.Quantity = &q
		case key == "product_id" && withProduct && req.ProductID == nil:
			id, ok := s.plainString()
			if !ok {
				return saleRequest{}, false
			}
			req.ProductID = &id
		default: // unknown, repeated, or not matched exactly (encoding/json ignores case)
			return saleRequest{}, false
		}
		s.space()
		if s.take('}') {
			return req, s.end()
		}
		if !s.take(',') {
			return saleRequest{}, false
		}
		s.space()
	}
}

// scanner walks a JSON text one byte at a time.
type scanner struct {
	b []byte
	i int
}

// space skips JSON whitespace.
func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// take consumes c if it is next.
func (s *scanner) take(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// plainString reads a string without escapes or control characters.
func (s *scanner) plainString() (string, bool) {
	if !s.take('"') {
		return "", false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, true
		case c == '\\', c < 0x20:
			return "", false
		}
	}
	return "", false
}

// maxScannedDigits keeps a scanned integer far from int64's overflow.
const maxScannedDigits = 18

// integer reads -?(0|[1-9][0-9]*) of at most maxScannedDigits digits. What
// follows is the caller's to check: a fraction or exponent then fails its
// expectation of whitespace, ',' or '}'.
func (s *scanner) integer() (int64, bool) {
	negative := s.take('-')
	start := s.i
	var n int64
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		if s.i > start && s.b[start] == '0' { // a leading zero
			return 0, false
		}
		n = n*10 + int64(s.b[s.i]-'0')
		s.i++
	}
	if digits := s.i - start; digits == 0 || digits > maxScannedDigits {
		return 0, false
	}
	if negative {
		n = -n
	}
	return n, true
}
