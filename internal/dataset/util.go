package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
