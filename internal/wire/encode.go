package wire

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends r as encoding/json's Marshal writes it, without
// reflection: every buyer's sale is written here.
func (r SaleRequest) AppendJSON(b []byte) []byte {
	b = append(b, `{"product_id":`...)
	b = AppendString(b, r.ProductID)
	b = append(b, `,"quantity":`...)
	b = strconv.AppendInt(b, r.Quantity, 10)
	return appendPayWithin(b, r.PayWithin)
}

// AppendJSON appends r as encoding/json's Marshal writes it.
func (r ProductSaleRequest) AppendJSON(b []byte) []byte {
	b = append(b, `{"quantity":`...)
	b = strconv.AppendInt(b, r.Quantity, 10)
	return appendPayWithin(b, r.PayWithin)
}

// appendPayWithin ends a sale's body: with its pay_within member when it
// has one (omitempty).
func appendPayWithin(b []byte, payWithin string) []byte {
	if payWithin != "" {
		b = append(b, `,"pay_within":`...)
		b = AppendString(b, payWithin)
	}
	return append(b, '}')
}

// AppendString appends s as a JSON string the way encoding/json does:
// '"', '\\' and control characters escaped, '<', '>' and '&' too
// (HTML-safe), U+2028 and U+2029 escaped, and invalid UTF-8 replaced by
// U+FFFD.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, `\b`...)
			case '\f':
				b = append(b, `\f`...)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
