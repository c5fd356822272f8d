package trinity

import (
	"fmt"
	"unicode/utf8"
)

// validText reports why s cannot be text in a store or a buffer: bytes that
// are not UTF-8, or a UTF-16 surrogate (U+D800–U+DFFF) in UTF-8's form. A
// Python str may hold a lone surrogate, and pickle writes it so
// (surrogatepass: "v\ud800" is 76 ED A0 80); neither Parquet's utf8, nor
// Arrow's, nor SQL text can hold it, and replacing it would change the
// value. Such text is refused, never written and never replaced.
func validText(s string) error {
	if utf8.ValidString(s) {
		return nil
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || n != 1 {
			i += n
			continue
		}
		if i+2 < len(s) && s[i] == 0xed && s[i+1]&0xe0 == 0xa0 && s[i+2]&0xc0 == 0x80 {
			sur := 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
			return fmt.Errorf("holds the UTF-16 surrogate U+%04X at byte %d (a Python str with a lone surrogate), which text outputs cannot hold", sur, i)
		}
		return fmt.Errorf("is not UTF-8 (byte 0x%02x at %d)", s[i], i)
	}
	return nil
}
