package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxBodyBytes bounds every request body; our bodies are a few dozen bytes.
const maxBodyBytes = 4 << 10

// decodeJSON reads exactly one JSON object into dst: the content type must be
// JSON, the body is capped at maxBodyBytes and must be UTF-8, and unknown
// fields and trailing data are refused.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := readJSONBody(w, r)
	if err != nil {
		return err
	}
	return unmarshalStrict(body, dst)
}

// readJSONBody is the body of a request that must carry JSON: the content
// type must say so, and the body is capped at maxBodyBytes and must be UTF-8.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" { // the usual one, without a parse
		mediaType, _, err := mime.ParseMediaType(ct)
		if err != nil || mediaType != "application/json" {
			return nil, fmt.Errorf("%w: Content-Type must be application/json, got %q", errUnsupportedMedia, ct)
		}
	}
	body, err := readBody(w, r)
	if err != nil {
		return nil, decodeError(err)
	}
	// encoding/json would quietly turn invalid UTF-8 into U+FFFD, storing
	// something other than what was sent (RFC 8259 §8.1: JSON is UTF-8).
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("%w: the body is not valid UTF-8", errMalformed)
	}
	return body, nil
}

// readBody reads r's body, at most maxBodyBytes of it. A body of a stated
// length that fits is read into a slice of that length in one go (net/http
// stops it there); any other is read through http.MaxBytesReader.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= maxBodyBytes {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	return io.ReadAll(r.Body)
}

// unmarshalStrict decodes body, exactly one JSON object, into dst, refusing
// unknown fields and trailing data.
func unmarshalStrict(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: unexpected data after the JSON object", errMalformed)
	}
	return nil
}

// decodeError turns a json or body-size error into a client-readable one.
func decodeError(err error) error {
	var (
		maxBytes  *http.MaxBytesError
		syntax    *json.SyntaxError
		typeError *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &maxBytes):
		return fmt.Errorf("%w: at most %d bytes", errTooLarge, maxBytes.Limit)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: empty body, want a JSON object", errMalformed)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: truncated JSON", errMalformed)
	case errors.As(err, &syntax):
		return fmt.Errorf("%w: invalid JSON at byte %d: %v", errMalformed, syntax.Offset, err)
	case errors.As(err, &typeError):
		if typeError.Field == "" {
			return fmt.Errorf("%w: want a JSON object, got %s", errMalformed, typeError.Value)
		}
		return fmt.Errorf("%w: field %q must be %s, got %s", errMalformed, typeError.Field, jsonKind(typeError.Type.Kind().String()), typeError.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for this one.
		return fmt.Errorf("%w: %s", errMalformed, strings.TrimPrefix(err.Error(), "json: "))
	default:
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number within range"
	case "string":
		return "a string"
	default:
		return "a " + goKind
	}
}
