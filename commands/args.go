package commands

import "github.com/cellserver/cellserver/limiter"

// parseInt parses a signed 64-bit decimal integer: an optional single
// leading '+' or '-', then one to 19 digits, nothing else. (A limiter's
// arguments take any number of leading zeros: limiter.ParseInt.)
func parseInt(b []byte) (int64, bool) {
	digits := b
	if len(digits) > 0 && (digits[0] == '-' || digits[0] == '+') {
		digits = digits[1:]
	}
	if len(digits) > 19 {
		return 0, false
	}
	return limiter.ParseInt(b)
}

// equalFold reports whether b equals the lower-case ASCII word w in any case.
func equalFold(b []byte, w string) bool {
	if len(b) != len(w) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// Match reports whether s matches the Redis glob pattern (as KEYS, SCAN
// MATCH and CONFIG GET use them).
func Match(pattern, s string) bool { return globMatch([]byte(pattern), []byte(s)) }

// globMatch reports whether s matches the Redis glob pattern p: * and ?,
// [abc], [^abc] or [!abc], [a-z] ranges, and \ to quote the next byte.
// It backtracks only to the last '*', so it runs in O(len(p)·len(s)) for
// any pattern a client sends.
func globMatch(p, s []byte) bool {
	var starP, starS []byte // where to resume after the last '*'
	star := false
	for len(s) > 0 {
		if len(p) > 0 {
			switch p[0] {
			case '*':
				for len(p) > 0 && p[0] == '*' {
					p = p[1:]
				}
				if len(p) == 0 {
					return true
				}
				starP, starS, star = p, s, true
				continue
			case '?':
				p, s = p[1:], s[1:]
				continue
			case '[':
				if rest, ok := matchClass(p[1:], s[0]); ok {
					p, s = rest, s[1:]
					continue
				}
			case '\\':
				if len(p) >= 2 && p[1] == s[0] {
					p, s = p[2:], s[1:]
					continue
				}
				if len(p) == 1 && s[0] == '\\' {
					p, s = p[1:], s[1:]
					continue
				}
			default:
				if p[0] == s[0] {
					p, s = p[1:], s[1:]
					continue
				}
			}
		}
		if !star {
			return false
		}
		starS = starS[1:]
		p, s = starP, starS
	}
	for len(p) > 0 && p[0] == '*' {
		p = p[1:]
	}
	return len(p) == 0
}

// matchClass matches c against the class whose body starts p (just after
// '['); it returns the pattern after the closing ']' and whether c matched.
func matchClass(p []byte, c byte) ([]byte, bool) {
	not := len(p) > 0 && (p[0] == '^' || p[0] == '!')
	if not {
		p = p[1:]
	}
	match := false
	for len(p) > 0 && p[0] != ']' {
		switch {
		case p[0] == '\\' && len(p) >= 2:
			if p[1] == c {
				match = true
			}
			p = p[2:]
		case len(p) >= 3 && p[1] == '-' && p[2] != ']':
			lo, hi := p[0], p[2]
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo <= c && c <= hi {
				match = true
			}
			p = p[3:]
		default:
			if p[0] == c {
				match = true
			}
			p = p[1:]
		}
	}
	if len(p) > 0 {
		p = p[1:] // the ']'
	}
	return p, match != not
}
