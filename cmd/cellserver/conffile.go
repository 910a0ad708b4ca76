package main

import (
	"errors"
	"strconv"
)

// errUnbalancedQuotes is redis-server's text for a config line whose
// quotes do not close, or close with something other than a blank after.
var errUnbalancedQuotes = errors.New("Unbalanced quotes in configuration line") //lint:ignore ST1005 redis-server's own text

// splitConfigLine splits one config file line into words as redis.conf's
// parser (sdssplitargs) does: words are separated by blanks (spaces, tabs
// and other white space); a word in "double quotes" may hold blanks and
// the escapes \n \r \t \b \a \\ \" and \xHH; a word in 'single quotes' may
// hold blanks and \'. A closing quote must be followed by a blank or the
// end of the line. "" is an empty word.
func splitConfigLine(line string) ([]string, error) {
	var words []string
	p := 0
	for {
		for p < len(line) && isBlank(line[p]) {
			p++
		}
		if p == len(line) {
			return words, nil
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			switch {
			case inq:
				switch {
				case p == len(line):
					return nil, errUnbalancedQuotes
				case line[p] == '\\' && p+3 < len(line) && line[p+1] == 'x' && isHex(line[p+2]) && isHex(line[p+3]):
					b, _ := strconv.ParseUint(line[p+2:p+4], 16, 8)
					cur = append(cur, byte(b))
					p += 3
				case line[p] == '\\' && p+1 < len(line):
					p++
					cur = append(cur, unescape(line[p]))
				case line[p] == '"':
					if p+1 < len(line) && !isBlank(line[p+1]) {
						return nil, errUnbalancedQuotes
					}
					done = true
				default:
					cur = append(cur, line[p])
				}
			case insq:
				switch {
				case p == len(line):
					return nil, errUnbalancedQuotes
				case line[p] == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					cur = append(cur, '\'')
				case line[p] == '\'':
					if p+1 < len(line) && !isBlank(line[p+1]) {
						return nil, errUnbalancedQuotes
					}
					done = true
				default:
					cur = append(cur, line[p])
				}
			default:
				switch {
				case p == len(line) || line[p] == ' ' || line[p] == '\n' || line[p] == '\r' || line[p] == '\t':
					done = true
				case line[p] == '"':
					inq = true
				case line[p] == '\'':
					insq = true
				default:
					cur = append(cur, line[p])
				}
			}
			if p < len(line) {
				p++
			}
		}
		words = append(words, string(cur))
	}
}

// isBlank is C's isspace in the C locale.
func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unescape is the byte a backslash escape inside double quotes stands for.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
