package lock

import (
	"fmt"
	"strings"
)

// fenceKey names the fencing counter that belongs to key, in the same Redis
// Cluster slot: "lock:{sku-1}" → "lock:{sku-1}:fence". A key without a hash
// tag is hashed whole, so its companion uses the whole key as its tag:
// "lock-a" → "{lock-a}:fence".
func fenceKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if hasHashTag(key) {
		return key + ":fence", nil
	}
	if strings.Contains(key, "}") {
		return "", fmt.Errorf("%w: %q has no hash tag and contains '}' (use a tag: \"lock:{id}\")", ErrInvalidKey, key)
	}
	return "{" + key + "}:fence", nil
}

// hasHashTag reports whether Redis Cluster hashes only part of key: the
// text between the first '{' and the first '}' after it, when not empty.
func hasHashTag(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(key[open+1:], '}')
	return end > 0
}
