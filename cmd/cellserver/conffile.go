package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cellserver/cellserver/server"
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

// maxIncludeDepth bounds nested include lines (and so include loops).
const maxIncludeDepth = 8

// loadFile applies a config file of "name value" lines, split into words
// as redis.conf's are (splitConfigLine: blanks, tabs included, separate
// words; quotes as redis-server reads them).
func loadFile(cfg *server.Config, path string) error { return loadFileDepth(cfg, path, 0) }

// loadFileDepth is loadFile for a file included depth levels deep: an
// "include <file>" line applies that file there, as redis-server does.
func loadFileDepth(cfg *server.Config, path string, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("config file: includes nested more than %d deep at %s", maxIncludeDepth, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	savedLines := 0
	for n := 1; sc.Scan(); n++ {
		line := strings.Trim(sc.Text(), " \t\r\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words, err := splitConfigLine(line)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		if len(words) == 0 {
			continue
		}
		name, args := strings.ToLower(words[0]), words[1:]
		if name == "include" {
			if len(args) != 1 {
				return fmt.Errorf("%s line %d: include takes one file", path, n)
			}
			if err := loadFileDepth(cfg, args[0], depth+1); err != nil {
				return fmt.Errorf("%s line %d: %w", path, n, err)
			}
			continue
		}
		if name == "save" {
			if savedLines > 0 && !(len(args) == 1 && args[0] == "") {
				args = append(strings.Fields(cfg.Save), args...) // several save lines add up, as in redis.conf
			}
			savedLines++
		}
		if err := set(cfg, name, args); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
	}
	return sc.Err()
}
