package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/cellserver/cellserver/server"
)

// maxIncludeDepth bounds nested include lines (and so include loops).
const maxIncludeDepth = 8

// loadFile applies a config file of "name value" lines, split into words
// as redis.conf's are (server.SplitConfigLine: blanks, tabs included,
// separate words; quotes as redis-server reads them).
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
		words, err := server.SplitConfigLine(line)
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
