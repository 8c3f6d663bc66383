package api

import (
	"strconv"
	"unicode/utf8"
)

// appendJSON appends p as encoding/json's Encoder writes it (the same bytes,
// newline included), without reflection: the crowd after a sell-out gets
// thousands of problems a second.
func (p problem) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, p.Type)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	for _, f := range [...]struct{ name, value string }{
		{`,"detail":`, p.Detail}, {`,"instance":`, p.Instance}, {`,"request_id":`, p.RequestID},
	} {
		if f.value != "" {
			b = append(b, f.name...)
			b = appendJSONString(b, f.value)
		}
	}
	if p.LockBreach {
		b = append(b, `,"lock_breach":true`...)
	}
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string the way encoding/json does:
// '"', '\\' and control characters escaped, '<', '>' and '&' too (HTML-safe),
// U+2028 and U+2029 escaped, and invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
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
